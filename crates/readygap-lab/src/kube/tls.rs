//! The lab API server over TLS, so that it can refuse a request without credentials (401) as
//! a real API server does: kubectl sends its kubeconfig's credentials only over TLS (client-go
//! `tools/clientcmd/client_config.go`: "only try to read the auth information if we are
//! secure"), so a plain-HTTP lab must treat a credential-less request as its admin. With a
//! real engine an exec runs a command on this machine and a cache drop drops its page cache:
//! that lab serves TLS and answers 401 to anyone without its kubeconfig's token.
//!
//! At each start: a CA and a server certificate for `127.0.0.1` and `localhost` (rcgen,
//! ECDSA P-256), the CA's PEM in the kubeconfig as `certificate-authority-data`. Handshakes
//! run concurrently (a client that connects and never speaks does not hold up the others)
//! and are bounded in time; a failed one is dropped.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::server::TlsStream;

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// The lab's certificate authority and the acceptor of its server certificate.
#[derive(Clone)]
pub struct LabTls {
    /// PEM of the CA that signed the server certificate (the kubeconfig's
    /// `certificate-authority-data`, base64 of this text).
    pub ca_pem: String,
    acceptor: TlsAcceptor,
}

impl LabTls {
    /// A new CA and server certificate for 127.0.0.1 and localhost.
    pub fn new() -> Result<Self, String> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose, SanType,
        };
        let fail = |what: &str, e: rcgen::Error| format!("the lab's TLS {what}: {e}");
        let ca_key = KeyPair::generate().map_err(|e| fail("CA key", e))?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("CA", e))?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "readygap-lab-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(|e| fail("CA", e))?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().map_err(|e| fail("server key", e))?;
        let mut server = CertificateParams::new(vec!["localhost".to_string()])
            .map_err(|e| fail("server certificate", e))?;
        server
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        server
            .distinguished_name
            .push(DnType::CommonName, "readygap-lab-apiserver");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = server
            .signed_by(&key, &issuer)
            .map_err(|e| fail("server certificate", e))?;

        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("the lab's TLS versions: {e}"))?
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(|e| format!("the lab's TLS certificate: {e}"))?;
        // HTTP/1.1 only: exec, attach and port-forward upgrade the connection (SPDY,
        // WebSocket), which HTTP/2 cannot.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            ca_pem: ca_cert.pem(),
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// A listener that hands axum only connections whose handshake completed.
    pub fn listener(&self, tcp: TcpListener) -> TlsListener {
        TlsListener {
            tcp,
            acceptor: self.acceptor.clone(),
            handshakes: JoinSet::new(),
        }
    }
}

/// TCP accepts, TLS handshakes in flight, completed connections out.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                (tcp, addr) = axum::serve::Listener::accept(&mut self.tcp) => {
                    no_delay(&tcp);
                    let acceptor = self.acceptor.clone();
                    self.handshakes.spawn(async move {
                        match tokio::time::timeout(HANDSHAKE_LIMIT, acceptor.accept(tcp)).await {
                            Ok(Ok(tls)) => Some((tls, addr)),
                            Ok(Err(e)) => {
                                tracing::debug!("lab: TLS handshake from {addr} failed: {e}");
                                None
                            }
                            Err(_) => None,
                        }
                    });
                }
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(conn)) = done {
                        return conn;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// A real API server sends each write at once: Go's `net` turns Nagle's algorithm off on
/// every TCP connection it accepts or dials (`net/tcpsock.go`, `newTCPConn`:
/// `setNoDelay(fd, true)`). Without it, a streamed answer's last small chunk forwarded by the
/// pod proxy can wait for the client's delayed ACK.
pub fn no_delay(tcp: &TcpStream) {
    let _ = tcp.set_nodelay(true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_rustls::rustls::pki_types::ServerName;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    #[tokio::test]
    async fn an_accepted_connection_sends_without_delay() {
        let tls = LabTls::new().unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut listener = tls.listener(tcp);
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(tls.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let client = tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            connector.connect(name, tcp).await
        });
        let (io, _) = axum::serve::Listener::accept(&mut listener).await;
        assert!(io.get_ref().0.nodelay().unwrap(), "Nagle's algorithm is on");
        assert!(client.await.unwrap().is_ok(), "the handshake completed");
    }
}
