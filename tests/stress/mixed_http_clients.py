"""Clients of every kind against tests/stress/bare_http_server.cpp for a while, each checking its answer:
python3 mixed_http_clients.py PORT SECONDS [THREADS]. Prints how many of each kind ran; exit 1 when any answer
was wrong or a connection failed.

Kinds: kept-alive requests with bodies, pipelined requests, heads and bodies cut off by the client, a head
trickled a byte at a time, a body so, a body sent after `Expect: 100-continue` is answered, a body refused at its
head, a half-closed client, a stalled head (408 after the server's 2 s timeout), a chunked body, bytes that are
not HTTP, and a 6 MiB answer read slowly (then a pipelined request on the same connection), not read at all (closed
at the 2 s timeout), or asked with HEAD."""
import random
import select
import socket
import sys
import threading
import time

KINDS = ["keep", "pipeline", "abort_head", "abort_body", "trickle", "slow_body", "expect", "refuse_body", "halfclose",
         "stall", "chunked", "garbage", "big_slow", "big_unread", "big_head"]
BIG = 6 << 20


def post(path, body):
    return b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def receive_all(s):
    got = b""
    while True:
        data = s.recv(65536)
        if not data:
            return got
        got += data


def one_client(kind, r, port):
    """Runs one connection of `kind`; returns None, or what was wrong."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(10)
    try:
        if kind == "keep":
            for _ in range(r.randint(1, 5)):
                n = r.randint(0, 5000)
                s.sendall(post(b"/x", b"a" * n))
                answer = s.recv(65536)
                if not answer.startswith(b"HTTP/1.1 200") or b'{"n":%d}' % n not in answer:
                    return answer[:80]
        elif kind == "pipeline":
            s.sendall(post(b"/x", b"b" * 10) * 3 + b"GET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answers = receive_all(s)
            if answers.count(b"HTTP/1.1 200") != 4 or not answers.endswith(b'{"n":0}'):
                return answers[:200]
        elif kind == "abort_head":
            s.sendall(b"GET /x HTTP/1.1\r\nHo")
        elif kind == "abort_body":
            s.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        elif kind == "trickle":
            for byte in b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n":
                s.send(bytes([byte]))
                time.sleep(0.05)
            answer = s.recv(65536)
            if not answer.startswith(b"HTTP/1.1 200"):
                return answer[:80]
        elif kind == "slow_body":
            s.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n")
            for _ in range(20):
                s.send(b"c")
                time.sleep(0.03)
            answer = s.recv(65536)
            if not answer.startswith(b"HTTP/1.1 200") or b'{"n":20}' not in answer:
                return answer[:80]
        elif kind == "expect":
            s.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\nExpect: 100-continue\r\n\r\n")
            interim = s.recv(65536)
            if not interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"):
                return interim[:80]
            s.sendall(b"expects")
            answer = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n"):] or s.recv(65536)
            if not answer.startswith(b"HTTP/1.1 200") or b'{"n":7}' not in answer:
                return answer[:80]
        elif kind == "refuse_body":
            s.sendall(post(b"/refuse", b"z" * 10000))
            answer = s.recv(65536)
            if not answer.startswith(b"HTTP/1.1 404"):
                return answer[:80]
        elif kind == "halfclose":
            s.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
            s.shutdown(socket.SHUT_WR)
            answer = s.recv(65536)
            if not answer.startswith(b"HTTP/1.1 200"):
                return answer[:80]
        elif kind == "stall" and r.random() < 0.1:  # most just connect and leave
            s.sendall(b"GET /x HTTP/1.1\r\n")
            answer = s.recv(65536)
            if not answer.startswith(b"HTTP/1.1 408"):
                return answer[:80]
        elif kind == "chunked":
            s.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            answer = s.recv(65536)
            if b'{"n":5}' not in answer:
                return answer[:120]
        elif kind == "garbage":
            s.sendall(bytes(r.randrange(256) for _ in range(r.randint(1, 3000))) + b"\r\n\r\n")
            s.recv(65536)
        elif kind == "big_slow":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            time.sleep(0.2)  # unread: the server's socket fills, and the listening thread takes the rest over
            got = b""
            while True:
                data = s.recv(256 * 1024)
                if not data:
                    break
                got += data
            head, _, rest = got.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200") or b"Content-Length: %d" % BIG not in head or \
                    rest[:BIG] != b"x" * BIG or not rest[BIG:].startswith(b"HTTP/1.1 200") or \
                    not rest.endswith(b'{"n":0}'):
                return head[:80] + b" ... %d bytes after the head" % len(rest)
        elif kind == "big_unread":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            select.select([s], [], [], 10)  # the answer has begun (a thread may have been busy)
            time.sleep(2.5)  # past the 2 s the server gives an answer to be taken: it closes the connection
            got = b""
            try:
                while True:
                    data = s.recv(1 << 20)
                    if not data:
                        break
                    got += data
            except ConnectionResetError:
                pass
            if len(got) >= BIG:
                return b"a 6 MiB answer not read for 2.5 s was still sent whole: %d bytes" % len(got)
        elif kind == "big_head":
            s.sendall(b"HEAD /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = receive_all(s)
            if not got.startswith(b"HTTP/1.1 200") or b"Content-Length: %d" % BIG not in got or \
                    not got.endswith(b"\r\n\r\n"):
                return got[:120]
        return None
    finally:
        s.close()


def main():
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 24
    end = time.time() + seconds
    lock = threading.Lock()
    counts, wrong = {}, []

    def worker(i):
        r = random.Random(i)
        while time.time() < end:
            kind = r.choice(KINDS)
            try:
                problem = one_client(kind, r, port)
            except OSError as e:
                problem = repr(e)
            with lock:
                counts[kind] = counts.get(kind, 0) + 1
                if problem is not None:
                    wrong.append((kind, problem))

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print("clients:", ", ".join(f"{k} {counts.get(k, 0)}" for k in KINDS), f"({sum(counts.values())} in all)")
    print("wrong:", len(wrong), wrong[:10])
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
