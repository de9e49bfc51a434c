#!/usr/bin/env python3
"""How many fresh loopback TCP connections get no SO_TIMESTAMPNS receive time.

The kernel turns receive stamps on lazily (net/core/dev.c `net_enable_timestamp` defers it
to a workqueue when no socket wanted them), so a connection that asks for stamps and reads
at once may get none. `--hold` keeps one asking socket open first, as readygap's
`arrival::keep_stamping` does. Usage: kernel-stamp-race.py [N] [--hold]
"""
import socket
import sys

SO_TIMESTAMPNS = 35  # asm-generic/socket.h
n = int(next((a for a in sys.argv[1:] if a.isdigit()), "200"))
if "--hold" in sys.argv:
    hold = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hold.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
missed = 0
for _ in range(n):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.socket()
    client.connect(listener.getsockname())
    client.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    server, _ = listener.accept()
    server.sendall(b"done\n")
    _, ancillary, _, _ = client.recvmsg(16, 256)
    missed += not ancillary
    for s in (client, server, listener):
        s.close()
print(f"{missed} of {n} connections got no receive time")
