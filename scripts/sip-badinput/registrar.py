#!/usr/bin/env python3
"""The registrar of scripts/sip-badinput/run.sh (a manual check of roomd's bad-input lines).
mode 'refuse': every REGISTER gets 401 with a fresh nonce (a wrong password).
mode 'accept': REGISTER gets 200; then, once roomd's Contact is known, sends hostile INVITEs
from the registrar's address and a flood of INVITEs from another socket."""
import socket, sys, time, re, select
mode, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", port))
flood = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); flood.bind(("127.0.0.1", 0))
nonce = 0; contact = None; done_attack = False; start = time.time()
def hdr(req, name):
    for line in req.split("\r\n"):
        if line.lower().startswith(name.lower() + ":"): return line
    return ""
def answer(req, status, extra=""):
    return (f"SIP/2.0 {status}\r\n{hdr(req,'Via')}\r\n{hdr(req,'From')}\r\n{hdr(req,'To')};tag=reg\r\n"
            f"{hdr(req,'Call-ID')}\r\n{hdr(req,'CSeq')}\r\n{extra}Content-Length: 0\r\n\r\n")
def invite(sock, callid, branch, body, frm="sip:alice@127.0.0.1"):
    p = sock.getsockname()[1]
    return (f"INVITE sip:room@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{p};branch={branch}\r\nMax-Forwards: 70\r\n"
            f"From: <{frm}>;tag=a1\r\nTo: <sip:room@127.0.0.1>\r\nCall-ID: {callid}\r\nCSeq: 1 INVITE\r\n"
            f"Contact: <sip:alice@127.0.0.1:{p}>\r\nContent-Type: application/sdp\r\nContent-Length: {len(body)}\r\n\r\n{body}")
head = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
while time.time() - start < float(sys.argv[3]):
    r, _, _ = select.select([s, flood], [], [], 0.2)
    for sock in r:
        data, addr = sock.recvfrom(65536); text = data.decode("utf-8", "replace")
        first = text.split("\r\n", 1)[0]
        print(f"{time.time()-start:6.2f} {'reg' if sock is s else 'flood'} <- {first}", flush=True)
        if first.startswith("REGISTER"):
            if mode == "refuse":
                nonce += 1
                s.sendto(answer(text, "401 Unauthorized", f'WWW-Authenticate: Digest realm="127.0.0.1", nonce="n{nonce}", qop="auth"\r\n').encode(), addr)
            else:
                m = re.search(r"Contact: <([^>]*)>", text); contact = addr
                s.sendto(answer(text, "200 OK", f"{hdr(text,'Contact')};expires=600\r\n").encode(), addr)
    if mode == "accept" and contact and not done_attack:
        done_attack = True
        time.sleep(0.5)
        s.sendto(invite(s, "hostile1@reg", "z9hG4bKh1", head + "m=audio 4000 RTP/AVP 0\r\nc=IN IP4 pbx.example\r\n").encode(), contact)
        s.sendto(invite(s, "hostile2@reg", "z9hG4bKh2", head + "m=audio 4000 RTP/AVP 0\r\n" * 40).encode(), contact)
        for i in range(300):
            flood.sendto(invite(flood, f"flood{i}@x", f"z9hG4bKf{i}", head + "m=audio 4000 RTP/AVP 0\r\n", frm="sip:flood@127.0.0.1").encode(), contact)
            if i % 50 == 49: time.sleep(0.05)
