#!/usr/bin/env python3
"""Writes the committed seed corpus of the DocSession fuzzer (Fuzz/corpus/).

Every seed exists twice: bare-NAME is the JSON body alone (the target also feeds the whole input to
InboundDecoder.decodeBody), framed-NAME is the same body behind a Content-Length header. Streams of
several messages and header faults exist only as stream-NAME. The two 1,000,000-deep seeds (2 MB
each) are not committed: run.sh writes them with --large into Fuzz/.build/seeds-large/.

Usage: python3 Fuzz/make-seeds.py [--large DIR]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def request(id_json: str, method: str, params: str = None) -> bytes:
    text = '{"jsonrpc":"2.0","id":%s,"method":"%s"' % (id_json, method)
    if params is not None:
        text += ',"params":' + params
    return (text + "}").encode()


def notification(method: str, params: str = None) -> bytes:
    text = '{"jsonrpc":"2.0","method":"%s"' % method
    if params is not None:
        text += ',"params":' + params
    return (text + "}").encode()


INIT = request("1", "initialize", '{"processId":1234,"clientInfo":{"name":"fuzz","version":"1"},'
               '"capabilities":{"general":{"positionEncodings":["utf-8","utf-16"]}},"trace":"off"}')

# Bodies named after the seed list of shared/design/safe-save.md ("Fuzzing"), then the protocol's own.
BODIES = {
    # Nesting: 33 (one past json-c's default depth of 32), the limit 64, one past it.
    "nest-33": b"[" * 33 + b"]" * 33,
    "nest-33-object": b'{"a":' * 33 + b"1" + b"}" * 33,
    "nest-64": b"[" * 64 + b"]" * 64,
    "nest-65": b"[" * 65 + b"]" * 65,
    "nest-33-params": request("1", "initialize", '{"capabilities":' + "[" * 31 + "]" * 31 + "}"),
    # 2^64 and the edges of the 64-bit signed range.
    "int-2pow64": b"18446744073709551616",
    "int-2pow64-id": request("18446744073709551616", "initialize"),
    "int-max": request("9223372036854775807", "initialize"),
    "int-max-plus-1": request("9223372036854775808", "initialize"),
    "int-min": request("-9223372036854775808", "initialize"),
    "int-min-minus-1": request("-9223372036854775809", "initialize"),
    "int-processid-2pow64": request("1", "initialize", '{"processId":18446744073709551616}'),
    # Non-finite and odd numbers.
    "double-1e400": b"1e400",
    "double-1e400-param": request("1", "initialize", '{"processId":1e400}'),
    "double-id": request("1.5", "initialize"),
    "double-id-exp": request("-1e-7", "initialize"),
    "double-tiny": b"[1e-400,4.9e-324,-0.0,0,-0,1E+2,0.1]",
    "number-bad": b"[01, 1., -, 1e, .5, +1, 0x10]",
    "nan": b"NaN",
    "nan-param": request("1", "initialize", "[NaN]"),
    "infinity": b"[Infinity,-Infinity]",
    # Duplicate member names, plain and spelled differently.
    "duplicate-keys": b'{"jsonrpc":"2.0","id":1,"id":2,"method":"initialize"}',
    "duplicate-keys-escaped": b'{"jsonrpc":"2.0","id":1,"method":"initialize","\\u0069d":2}',
    "duplicate-keys-nested": request("1", "initialize", '{"trace":"off","trace":"verbose"}'),
    # \u0000 in values and in a member name.
    "nul-in-string": request('"a\\u0000b"', "initialize\\u0000"),
    "nul-in-name": b'{"jsonrpc":"2.0","id":1,"method":"initialize","a\\u0000":1}',
    "nul-raw": b'{"jsonrpc":"2.0","id":"a\x00b","method":"x"}',
    # Lone surrogate escapes; a valid pair.
    "lone-high-surrogate": request('"\\ud800"', "initialize"),
    "lone-low-surrogate": request('"\\udc00"', "initialize"),
    "surrogate-pair": request('"\\ud83d\\ude00"', "initialize"),
    # Malformed UTF-8: overlong, encoded surrogate, bytes above F4; valid 2, 3 and 4 byte forms.
    "utf8-overlong-c0af": b'{"jsonrpc":"2.0","id":"\xc0\xaf","method":"initialize"}',
    "utf8-surrogate-eda080": b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"initialize"}',
    "utf8-f5": b'{"jsonrpc":"2.0","id":"\xf5\x80\x80\x80","method":"initialize"}',
    "utf8-valid": '{"jsonrpc":"2.0","id":"é€😀","method":"initialize"}'.encode(),
    "utf8-truncated": b'{"jsonrpc":"2.0","id":"\xe2\x82","method":"initialize"}',
    # Trailing garbage and other syntax json-c lets through in strict mode.
    "trailing-garbage": INIT + b" x",
    "trailing-second-value": b"{} {}",
    "hex-number": b"0x10",
    "single-quotes": b"{'jsonrpc':'2.0','id':1,'method':'initialize'}",
    "control-char-in-string": b'{"jsonrpc":"2.0","id":"a\tb","method":"x"}',
    "unterminated-string": b'{"jsonrpc":"2.0","id":"abc',
    "empty": b"",
    "whitespace": b" \r\n\t",
    # Batches.
    "batch-empty": b"[]",
    "batch-all-notifications": b"[" + notification("initialized") + b"," + notification("$/setTrace", '{"value":"off"}')
    + b"," + notification("unknown/notification") + b"]",
    "batch-mixed": b"[" + INIT + b"," + notification("initialized") + b",1," + request('"two"', "shutdown")
    + b',{"jsonrpc":"2.0","id":3}' + b"," + request("4", "no/such/method") + b"]",
    "batch-nested": b"[[]]",
    "batch-invalid-elements": b'[1,"a",null,true,{},[]]',
    "batch-cancel": b"[" + request("7", "initialize") + b"," + notification("$/cancelRequest", '{"id":7}') + b"]",
    "batch-exit": b"[" + notification("exit") + b"," + request("1", "initialize") + b"]",
    "batch-duplicate-ids": b"[" + request("1", "initialize") + b"," + request("1", "shutdown") + b"]",
    # Single messages of every kind.
    "initialize": INIT,
    "initialize-verbose": request("1", "initialize", '{"trace":"verbose","capabilities":{"positionEncodings":["utf-32"]}}'),
    "initialize-bad-params": request("1", "initialize", '{"processId":"12","clientInfo":{"name":3}}'),
    "initialize-array-params": request("1", "initialize", "[1,2]"),
    "shutdown": request('"s"', "shutdown"),
    "shutdown-params": request('"s"', "shutdown", '{"a":1}'),
    "exit": notification("exit"),
    "initialized": notification("initialized"),
    "set-trace": notification("$/setTrace", '{"value":"messages"}'),
    "set-trace-bad": notification("$/setTrace", '{"value":"loud"}'),
    "cancel-request": notification("$/cancelRequest", '{"id":1}'),
    "cancel-request-bad": notification("$/cancelRequest", '{"id":[1]}'),
    "unknown-method": request("1", "textDocument/hover", "{}"),
    "id-null": request("null", "initialize"),
    "id-object": request("{}", "initialize"),
    "id-bool": request("true", "initialize"),
    "jsonrpc-missing": b'{"id":1,"method":"initialize"}',
    "jsonrpc-wrong": b'{"jsonrpc":"1.0","id":1,"method":"initialize"}',
    "method-number": b'{"jsonrpc":"2.0","id":1,"method":1}',
    "params-string": request("1", "initialize", '"x"'),
    "response-result": b'{"jsonrpc":"2.0","id":1,"result":{"a":[1,2]}}',
    "response-error": b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no","data":null}}',
    "response-bad-error": b'{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"no"}}',
    "response-both": b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}',
    "not-an-object": b'"just a string"',
}

SESSION = [
    INIT,
    notification("initialized"),
    request("2", "textDocument/hover", '{"textDocument":{"uri":"file:///a"}}'),
    notification("$/setTrace", '{"value":"verbose"}'),
    request("3", "initialize"),
    request("4", "shutdown"),
    request("5", "shutdown"),
    notification("exit"),
]

# Document methods. The target rewrites every file: URI to a file of a private directory named
# after the URI's last segment (Fuzz/README.md), where a.txt, empty, utf16.txt, binary and
# latin1.txt exist.
DOCUMENTS = [
    INIT,
    request("2", "document/open", '{"uri":"file:///w/a.txt","workDoneToken":"t1"}'),
    request("3", "document/read", '{"document":"d1"}'),
    request("4", "document/read",
            '{"document":"d1","range":{"start":{"line":0,"character":2},"end":{"line":1,"character":3}}}'),
    request("5", "document/edit", '{"document":"d1","version":1,"edits":[{"range":{"start":{"line":0,"character":0},'
            '"end":{"line":0,"character":4}},"text":"LINE"},{"text":"all new\\n"}],"undo":{"merge":true,"label":"l"}}'),
    request("6", "document/undo", '{"document":"d1"}'),
    request("7", "document/redo", '{"document":"d1","version":2}'),
    request("8", "document/state", '{"document":"d1"}'),
    request("9", "document/close", '{"document":"d1","save":"never"}'),
    request("10", "document/create", '{"uri":"file:///w/new.txt","text":"hello\\n"}'),
    request("11", "document/create", '{"uri":"file:///w/a.txt","text":"exists"}'),
    request("12", "document/open", '{"uri":"file:///w/utf16.txt","encoding":"auto","includeText":true}'),
    request("13", "document/open", '{"uri":"file:///w/latin1.txt","encoding":"iso-8859-1"}'),
    request("14", "document/open", '{"uri":"file:///w/binary","workDoneToken":7}'),
    request("15", "document/open", '{"uri":"file:///w/empty","includeText":false}'),
    request("16", "document/open", '{"uri":"file:///w/missing.txt"}'),
    request("17", "document/open", '{"uri":"http://host/a.txt"}'),
    request("18", "document/open", '{"uri":"file://host/a%20b.txt"}'),
    request("19", "document/edit", '{"document":"d9","version":0,"edits":[]}'),
    request("20", "document/close", '{"document":"d2"}'),
]

# The workspace (README §11): the target's server has its sandbox directory as its only root, and
# rewrites `to` and `from` like `uri`, `directory` and `root` to the directory itself.
WORKSPACE = [
    INIT,
    request("2", "document/create", '{"directory":"file:///w","naming":{"prefix":"Note","style":"sequence","extension":"txt"},"text":"x"}'),
    request("3", "document/create", '{"directory":"file:///w","naming":{"style":"uuid","nameFrom":"firstLine"},"text":"Title\\n"}'),
    request("4", "workspace/query", '{"root":"file:///w","glob":"**/*.{txt,md}","recursive":true,"watch":true}'),
    request("5", "document/rename", '{"document":"d1","name":"Renamed.txt"}'),
    request("6", "document/move", '{"uri":"file:///w/a.txt","to":"file:///w/moved.txt","replace":false}'),
    request("7", "workspace/import", '{"from":"file:///w/latin1.txt","directory":"file:///w","open":true}'),
    request("8", "workspace/export", '{"document":"d1","to":"file:///w/export.txt","replace":true}'),
    request("9", "document/delete", '{"document":"d2","discard":true}'),
    request("10", "document/delete", '{"uri":"file:///w/empty"}'),
    request("11", "workspace/stopQuery", '{"query":"q1"}'),
    request("12", "workspace/query", '{"root":"file:///w","glob":"[a-"}'),
    request("13", "document/open", '{"uri":"file:///w/../../etc/passwd"}'),
    request("14", "document/moveToStorage", '{"uri":"file:///w/a.txt","storage":"synced"}'),
    request("15", "workspace/moveAllToStorage", '{"storage":"local"}'),
]

# Whole streams: sessions, several messages per read, header faults and the resynchronisation after
# them.
STREAMS = {
    "session": b"".join(frame(m) for m in SESSION),
    "session-lf-only": b"".join(b"Content-Length: %d\n\n" % len(m) + m for m in SESSION),
    "session-no-exit": b"".join(frame(m) for m in SESSION[:-1]),
    "session-exit-first": frame(notification("exit")) + frame(INIT),
    "session-cancel": frame(INIT) + frame(request("9", "shutdown")) + frame(notification("$/cancelRequest", '{"id":9}'))
    + frame(request("10", "shutdown")) + frame(notification("exit")),
    "session-trace": frame(request("1", "initialize", '{"trace":"verbose"}')) + frame(request("2", "x/y", "[1]"))
    + frame(b"[" + request("3", "a") + b"," + notification("n") + b"]"),
    "session-batch": frame(BODIES["batch-mixed"]) + frame(BODIES["batch-all-notifications"]) + frame(b"[]"),
    "header-missing-length": b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}" + frame(INIT),
    "header-negative-length": b"Content-Length: -5\r\n\r\n{}" + frame(INIT),
    "header-non-numeric-length": b"Content-Length: abc\r\n\r\n{}" + frame(INIT),
    "header-huge-length": b"Content-Length: 99999999999999999999999\r\n\r\n{}" + frame(INIT),
    "header-over-cap-length": b"Content-Length: 70000000\r\n\r\n" + b"x" * 64 + frame(INIT),
    "header-empty-length": b"Content-Length: \r\n\r\n{}" + frame(INIT),
    "header-lowercase": b"content-length: %d\r\n\r\n" % len(INIT) + INIT,
    "header-uppercase": b"CONTENT-LENGTH:%d\r\n\r\n" % len(INIT) + INIT,
    "header-content-type": b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
    % len(INIT) + INIT,
    "header-content-type-first": b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(INIT) + INIT,
    "header-duplicate-length": b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(INIT), len(INIT)) + INIT,
    "header-conflicting-length": b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}" + frame(INIT),
    "header-no-colon": b"Content-Length 2\r\n\r\n{}" + frame(INIT),
    "header-unknown": b"X-Whatever: yes\r\nContent-Length: 2\r\n\r\n{}",
    "header-spaces": b"Content-Length:   \t2\t \r\n\r\n{}",
    "header-plus-sign": b"Content-Length: +2\r\n\r\n{}" + frame(INIT),
    "header-length-short": b"Content-Length: 5\r\n\r\n" + INIT,
    "header-length-long": b"Content-Length: %d\r\n\r\n" % (len(INIT) + 10) + INIT + frame(INIT),
    "header-blank-lines-between": frame(INIT) + b"\r\n\r\n" + frame(notification("exit")),
    "unframed-json": INIT + b"\r\n" + frame(INIT),
    # Long lines and bodies: past the 8 KiB header line limit, exactly at it (a read may end between
    # its CR and LF), and a body over the 4 KiB cap the target sometimes sets.
    "header-line-too-long": b"X-Long: " + b"a" * 9000 + b"\r\n" + frame(INIT),
    "header-line-at-limit": b"X-Long: " + b"a" * (8192 - 8) + b"\r\n" + frame(INIT),
    "body-over-small-cap": frame(request("1", "initialize", '{"clientInfo":{"name":"' + "n" * 5000 + '"}}'))
    + frame(notification("exit")),
    "documents": b"".join(frame(m) for m in DOCUMENTS),
    "workspace": b"".join(frame(m) for m in WORKSPACE),
    "documents-batch": frame(INIT) + frame(b"[" + b",".join(DOCUMENTS[1:9]) + b"]"),
    "documents-cancel": frame(INIT) + frame(request("2", "document/open", '{"uri":"file:///w/a.txt","workDoneToken":"t"}'))
    + frame(notification("$/cancelRequest", '{"id":2}')) + frame(request("3", "document/state", '{"document":"d1"}')),
    "documents-trace": frame(request("1", "initialize", '{"trace":"verbose"}'))
    + b"".join(frame(m) for m in DOCUMENTS[1:4]),
    "truncated-body": b"Content-Length: 100\r\n\r\n{\"jsonrpc\"",
    "truncated-header": b"Content-Len",
}


def write(directory: str, name: str, data: bytes) -> None:
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--large"] and len(args) == 2:
        directory = args[1]
        os.makedirs(directory, exist_ok=True)
        deep = b"[" * 1_000_000 + b"]" * 1_000_000
        write(directory, "bare-nest-1000000", deep)
        write(directory, "framed-nest-1000000", frame(deep))
        return
    if args:
        sys.exit(__doc__)
    os.makedirs(CORPUS, exist_ok=True)
    for old in os.listdir(CORPUS):
        os.remove(os.path.join(CORPUS, old))
    for name, body in BODIES.items():
        write(CORPUS, "bare-" + name, body)
        write(CORPUS, "framed-" + name, frame(body))
    for name, stream in STREAMS.items():
        write(CORPUS, "stream-" + name, stream)


if __name__ == "__main__":
    main()
