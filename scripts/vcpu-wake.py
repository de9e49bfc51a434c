#!/usr/bin/env python3
"""The machine's floor under any loopback timing: the round trip of one byte over TCP
(TCP_NODELAY) between two processes after 10 ms idle, with both ends pinned to one CPU
and pinned to two. On a VM that halts idle vCPUs, the second is dominated by waking the
other vCPU; no instrument that sleeps between events can observe faster than that.
Usage: scripts/vcpu-wake.py [ROUND_TRIPS] (default 300). Needs two CPUs for the second."""
import os
import socket
import statistics
import sys
import time


def round_trips(cpu_a, cpu_b, n):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {cpu_b})
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(64):
            conn.sendall(data)
        os._exit(0)
    os.sched_setaffinity(0, {cpu_a})
    c = socket.create_connection(srv.getsockname())
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    for _ in range(n):
        time.sleep(0.01)
        t = time.perf_counter_ns()
        c.sendall(b"x")
        c.recv(64)
        out.append((time.perf_counter_ns() - t) / 1000)
    c.close()
    os.waitpid(pid, 0)
    return out


n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
for a, b in [(0, 0), (0, 1)]:
    rt = sorted(round_trips(a, b, n))
    print(f"cpus {a},{b}: round trip after 10 ms idle median {statistics.median(rt):.1f} us, p90 {rt[int(n * 0.9)]:.1f} us")
