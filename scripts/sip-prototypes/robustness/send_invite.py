#!/usr/bin/env python3
"""Sends one INVITE carrying an SDP file to sip:room@ through the test kamailio, from a user of
another domain (so kamailio relays it without a challenge, as a registrar relays calls from
outside), and prints the first response line.   send_invite.py KAMAILIO_PORT SDP_FILE"""
import socket, sys
port, sdp = int(sys.argv[1]), open(sys.argv[2], "rb").read()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
me = s.getsockname()[1]
msg = (b"INVITE sip:room@127.0.0.1:%d SIP/2.0\r\n" % port
       + b"Via: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bKattack1;rport\r\n" % me
       + b"Max-Forwards: 70\r\nFrom: <sip:caller@elsewhere.example>;tag=a1\r\n"
       + b"To: <sip:room@127.0.0.1:%d>\r\nCall-ID: attack-1@elsewhere.example\r\nCSeq: 1 INVITE\r\n" % port
       + b"Contact: <sip:caller@127.0.0.1:%d>\r\nContent-Type: application/sdp\r\n" % me
       + b"Content-Length: %d\r\n\r\n" % len(sdp) + sdp)
s.sendto(msg, ("127.0.0.1", port))
s.settimeout(3)
try:
    while True:
        data = s.recv(65536)
        print("response:", data.split(b"\r\n", 1)[0].decode(errors="replace"))
        if not data.startswith(b"SIP/2.0 1"):
            break
except socket.timeout:
    print("no final response within 3 s")
