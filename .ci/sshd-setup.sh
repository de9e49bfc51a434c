#!/usr/bin/env bash
# Starts a private OpenSSH server on 127.0.0.1:2222 for readygap's node-access tests
# (tests/node_ssh.rs). Run as root; idempotent; needs no stdin (CI=true).
#
# Everything lives in one fixed directory (default /tmp/readygap-ssh, override with
# READYGAP_SSH_DIR); the tests read their paths from there, nothing is exported:
#   sshd_config, sshd.log (sshd -E), sshd.pid   the server, its log and pid
#   ssh_host_ed25519_key[.pub]                  the server's own host key
#   id_ed25519[.pub]                            client key authorised for root and rgtest
#   id_wrong[.pub]                              client key authorised for nobody
#   authorized_keys                             holds id_ed25519.pub
#   known_hosts                                 "[127.0.0.1]:2222 <host key>"
#   port                                        the port (2222)
#   ready                                       written last, once a login has worked
# Users "rgtest" (no password, not in sudoers: the "sudo needs a password" error) and
# "rgsudo" (passwordless sudo for sh only, /etc/sudoers.d/readygap-test: the sudo path that
# works) are created; sudo is installed for them. Both log in with id_ed25519.
set -euo pipefail

DIR="${READYGAP_SSH_DIR:-/tmp/readygap-ssh}"
PORT="${READYGAP_SSH_PORT:-2222}"
TEST_USER=rgtest
SUDO_USER_NAME=rgsudo

if [ "$(id -u)" -ne 0 ]; then
  echo "sshd-setup: must run as root" >&2
  exit 1
fi

missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
command -v sudo >/dev/null 2>&1 || missing+=(sudo)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "sshd-setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q </dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi

mkdir -p "$DIR"
chmod 0755 "$DIR"  # rgtest must read authorized_keys; private keys stay 0600
rm -f "$DIR/ready"

# Stop a server this script started before (by its pid file only).
if [ -f "$DIR/sshd.pid" ]; then
  old="$(cat "$DIR/sshd.pid" || true)"
  # Only if that pid is still our sshd (a pid file from an earlier boot may name another process).
  if [ -n "$old" ] && kill -0 "$old" 2>/dev/null \
      && tr '\0' ' ' < "/proc/$old/cmdline" 2>/dev/null | grep -q -- "$DIR/sshd_config"; then
    kill "$old" || true
    for _ in $(seq 1 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$DIR/sshd.pid"
fi

[ -f "$DIR/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C readygap-test-host -f "$DIR/ssh_host_ed25519_key"
[ -f "$DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C readygap-test-client -f "$DIR/id_ed25519"
[ -f "$DIR/id_wrong" ] || ssh-keygen -q -t ed25519 -N '' -C readygap-test-wrong -f "$DIR/id_wrong"
cp "$DIR/id_ed25519.pub" "$DIR/authorized_keys"
chmod 0644 "$DIR/authorized_keys"
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$DIR/ssh_host_ed25519_key.pub")" > "$DIR/known_hosts"
echo "$PORT" > "$DIR/port"

for u in "$TEST_USER" "$SUDO_USER_NAME"; do
  if ! id "$u" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/sh "$u"
  fi
  # A '*' password: no password login, but not "locked" for sshd's public-key check.
  usermod -p '*' "$u"
done
# rgsudo may run `sh` as root without a password (the drop-caches path for non-root users).
sudoers="$(mktemp)"
printf '%s ALL=(root) NOPASSWD: /bin/sh, /usr/bin/sh\n' "$SUDO_USER_NAME" > "$sudoers"
visudo -cqf "$sudoers"
install -m 0440 "$sudoers" /etc/sudoers.d/readygap-test
rm -f "$sudoers"

mkdir -p /run/sshd
chmod 0755 /run/sshd

cat > "$DIR/sshd_config" <<CONF
Port $PORT
ListenAddress 127.0.0.1
HostKey $DIR/ssh_host_ed25519_key
PidFile $DIR/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
# The key file sits under /tmp (world-writable parent), which StrictModes would refuse.
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowUsers root $TEST_USER $SUDO_USER_NAME
LogLevel VERBOSE
MaxStartups 100
MaxSessions 50
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
Subsystem sftp internal-sftp
CONF

/usr/sbin/sshd -t -f "$DIR/sshd_config"
: > "$DIR/sshd.log"
/usr/sbin/sshd -f "$DIR/sshd_config" -E "$DIR/sshd.log"

ok=0
for _ in $(seq 1 100); do
  if ssh -F /dev/null -i "$DIR/id_ed25519" -p "$PORT" \
      -o BatchMode=yes -o ConnectTimeout=5 -o IdentitiesOnly=yes \
      -o UserKnownHostsFile="$DIR/known_hosts" -o StrictHostKeyChecking=yes \
      root@127.0.0.1 true </dev/null 2>"$DIR/setup-check.err"; then
    ok=1
    break
  fi
  sleep 0.2
done
if [ "$ok" -ne 1 ]; then
  echo "sshd-setup: login to root@127.0.0.1:$PORT failed:" >&2
  cat "$DIR/setup-check.err" >&2
  tail -n 20 "$DIR/sshd.log" >&2 || true
  exit 1
fi
date -u +%FT%TZ > "$DIR/ready"
echo "sshd-setup: sshd on 127.0.0.1:$PORT ready (files in $DIR)"
