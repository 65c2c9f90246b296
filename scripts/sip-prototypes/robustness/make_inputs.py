#!/usr/bin/env python3
"""Writes the malformed SIP and SDP inputs the prototypes' parsers are fed (issue 29).
   python3 make_inputs.py DIR   -> DIR/<name>.sip, DIR/<name>.sdp"""
import os, sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

HEAD = (b"INVITE sip:far@127.0.0.1 SIP/2.0\r\n"
        b"Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bKabc\r\n"
        b"Max-Forwards: 70\r\n"
        b"From: \"Room\" <sip:room@127.0.0.1>;tag=1\r\n"
        b"To: <sip:far@127.0.0.1>\r\n"
        b"Call-ID: c1@127.0.0.1\r\n"
        b"CSeq: 1 INVITE\r\n"
        b"Contact: <sip:room@127.0.0.1:5070>\r\n")
SDP = (b"v=0\r\no=room 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
       b"m=audio 40000 RTP/AVP 111 9 0\r\na=rtpmap:111 opus/48000/2\r\n"
       b"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz\r\n")

def msg(extra=b"", body=SDP, clen=None):
    cl = str(len(body)).encode() if clen is None else clen
    return HEAD + extra + b"Content-Type: application/sdp\r\nContent-Length: " + cl + b"\r\n\r\n" + body

cases = {
    "00-valid": msg(),
    "01-truncated-header": HEAD[:HEAD.index(b"To:") + 9],
    "02-truncated-no-blank-line": HEAD + b"Content-Length: 0\r\n",
    "03-content-length-huge": msg(clen=b"4294967296000"),
    "04-content-length-20-digits": msg(clen=b"99999999999999999999"),
    "05-content-length-negative": msg(clen=b"-1"),
    "06-content-length-bigger-than-body": msg(clen=b"100000"),
    "07-10000-via": msg(b"".join(b"Via: SIP/2.0/UDP 10.0.%d.%d:5060;branch=z9hG4bK%d\r\n" % (i // 250, i % 250, i) for i in range(10000))),
    "08-10000-via-one-line": msg(b"Via: " + b", ".join(b"SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK%d" % i for i in range(10000)) + b"\r\n"),
    "09-invalid-utf8": msg(b"Subject: \xff\xfe\xc0\xaf\xed\xa0\x80\r\n").replace(b"\"Room\"", b"\"R\xc3\x28\xff\""),
    "10-64k-header-line": msg(b"Subject: " + b"A" * 65536 + b"\r\n"),
    "11-64k-uri": msg().replace(b"sip:far@127.0.0.1 SIP", b"sip:" + b"f" * 65536 + b"@127.0.0.1 SIP", 1),
    "12-nul-in-header": msg(b"Subject: a\x00b\r\n"),
    "13-empty": b"",
    "14-only-crlf": b"\r\n\r\n",
    "15-unclosed-quote": msg().replace(b"\"Room\" <", b"\"Room <", 1),
    "16-10000-header-params": msg(b"Contact: <sip:a@b>" + b"".join(b";p%d=%d" % (i, i) for i in range(10000)) + b"\r\n"),
    "17-cseq-overflow": msg().replace(b"CSeq: 1 INVITE", b"CSeq: 99999999999999999999 INVITE"),
    "18-missing-headers": b"INVITE sip:a@b SIP/2.0\r\n\r\n",
    "19-status-line-garbage": b"SIP/2.0 9999999999 \xff\r\nVia: x\r\n\r\n",
    "20-header-no-colon": msg(b"ThisHeaderHasNoColon\r\n"),
    "21-folded-header-lines": msg(b"Subject: a\r\n" + b" b\r\n" * 10000),
    "22-deep-angle-brackets": msg().replace(b"To: <sip:far@127.0.0.1>", b"To: " + b"<" * 10000 + b"sip:far@127.0.0.1" + b">" * 10000),
    "23-bare-lf": msg().replace(b"\r\n", b"\n"),
    "24-bad-auth-header": msg(b"Authorization: Digest " + b"x=\"" * 5000 + b"\r\n"),
}
for name, data in cases.items():
    open(os.path.join(out, name + ".sip"), "wb").write(data)

sdps = {
    "s0-valid": SDP,
    "s1-10000-formats": SDP.replace(b"RTP/AVP 111 9 0", b"RTP/AVP " + b" ".join(b"%d" % (i % 128) for i in range(10000))),
    "s2-huge-numbers": SDP.replace(b"40000", b"99999999999999999999").replace(b"48000/2", b"99999999999999999999/99999"),
    "s3-no-c-line": SDP.replace(b"c=IN IP4 127.0.0.1\r\n", b""),
    "s4-truncated": SDP[:40],
    "s5-64k-attr": SDP + b"a=" + b"x" * 65536 + b"\r\n",
    "s6-invalid-utf8": SDP.replace(b"s=-", b"s=\xff\xfe\xc0"),
    "s7-10000-media": SDP + b"m=audio 1 RTP/AVP 0\r\n" * 10000,
    "s8-crypto-garbage": SDP.replace(b"inline:WVNf", b"inline:" + b"\xff" * 1000),
}
for name, data in sdps.items():
    open(os.path.join(out, name + ".sdp"), "wb").write(data)
print(len(cases), "SIP and", len(sdps), "SDP inputs in", out)
