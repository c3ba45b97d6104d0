"""How long a health probe waits behind many open connections (docs/PERFORMANCE.md, serve section):
python3 held_connections_probe.py PORT MODE N [PROBES]. Opens N connections to a server on 127.0.0.1:PORT that say
nothing (MODE silent), or were answered one GET /healthz and are kept alive (idle), or send a request head a byte a
second (trickle); 0.5 s later times PROBES (default 3) GET /healthz from fresh connections, 0.3 s apart. With
trickle, then says how many of the first 20 trickling clients were answered 408. Raise `ulimit -n` above N first
(the server's too)."""
import socket
import sys
import threading
import time


def main():
    port, mode, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    probes = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    if mode not in ("silent", "idle", "trickle"):
        sys.exit(f"held_connections_probe.py: MODE is silent, idle or trickle, not {mode!r}")
    held = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        if mode == "idle":
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(4096)
        elif mode == "trickle":
            s.sendall(b"G")
        held.append(s)
    stop = threading.Event()

    def trickle():  # the next byte of the head to every connection, once a second
        head = b"ET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
        for k in range(len(head)):
            if stop.is_set():
                return
            for s in held:
                try:
                    s.send(head[k:k + 1])
                except OSError:
                    pass
            time.sleep(1)

    if mode == "trickle":
        threading.Thread(target=trickle, daemon=True).start()
    time.sleep(0.5)
    for _ in range(probes):
        start = time.time()
        p = socket.create_connection(("127.0.0.1", port))
        p.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while True:
            data = p.recv(4096)
            if not data:
                break
            answer += data
        p.close()
        status = answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/") else "no answer"
        print(f"{mode} x{n}: /healthz {status} in {time.time() - start:.3f} s", flush=True)
        time.sleep(0.3)
    if mode == "trickle":
        start = time.time()
        answered = 0
        for s in held[:20]:
            s.settimeout(10)
            try:
                if s.recv(4096).startswith(b"HTTP/1.1 408"):
                    answered += 1
            except OSError:
                pass
        print(f"first 20 trickling clients: {answered} answered 408 within {time.time() - start:.1f} s more")
    stop.set()


if __name__ == "__main__":
    main()
