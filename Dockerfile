# The image of `readygap watch` (manifests/watch/): the release binary on a distroless base
# with glibc (readygap links libc dynamically) and a nonroot user (65532, as the Deployment's
# securityContext asks). Nothing is downloaded at run time; the binary needs no files but the
# service account's token, which Kubernetes mounts.
#
#   docker build -t REGISTRY/readygap:0.1.0 .
#   (cd manifests/watch && kustomize edit set image ghcr.io/readygap/readygap=REGISTRY/readygap:0.1.0)
#
# Not built by CI (this project's CI machine has no container engine); `.dockerignore` keeps
# the build context to the sources.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin readygap \
 && install -D -m 0755 target/release/readygap /out/readygap

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/readygap /usr/local/bin/readygap
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/readygap"]
CMD ["watch", "--all-namespaces", "--selector", "readygap.io/watch=true", "--metrics-addr", "0.0.0.0:9464"]
