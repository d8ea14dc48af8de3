"""Validation of one command (inside a command buffer) or one host step, into a plain dict.

Buffer references are a buffer name (the whole buffer) or ``{buffer, offset, length}``; they
become ``(name, offset, length or None)``. Wait and signal lists are ``{semaphore = value, ...}``
tables (or ``[[name, value], ...]`` lists) and become ``[(name, value), ...]``.

>>> from halsim.schedule.load import Schedule, _Checker
>>> s = Schedule("x.toml", semaphores={"s": 0}, buffers={"a": 64})
>>> check_step(_Checker("x.toml"), s, {"call": "fill", "target": {"buffer": "a", "length": 16},
...                                    "signal": {"s": 1}, "queue": 1}, "host[0]")["target"]
('a', 0, 16)
"""

from __future__ import annotations

from reference.hal import StatusCode

COMMAND_FIELDS = {
    "fill": ("target", "pattern", "pattern_length"),
    "copy": ("source", "target"),
    "update": ("target", "data"),
    "dispatch": ("entry", "workgroups", "constants", "bindings"),
    "barrier": (),
}
_QUEUE = ("wait", "signal", "queue")
STEP_FIELDS = {
    "execute": _QUEUE + ("command_buffer",),
    "barrier": _QUEUE,
    "fill": _QUEUE + ("target", "pattern", "pattern_length"),
    "copy": _QUEUE + ("source", "target", "length"),
    "update": _QUEUE + ("target", "data"),
    "dispatch": _QUEUE + ("entry", "workgroups", "constants", "bindings"),
    "alloca": _QUEUE + ("name", "size"),
    "dealloca": _QUEUE + ("buffer",),
    "signal": ("semaphore", "value"),
    "fail": ("semaphore", "status", "message"),
    "wait": ("wait", "mode", "timeout"),
    "sleep": ("seconds",),
    "release": ("names",),
    "flush": (),
}


def _ref(c, s, value, where):
    if isinstance(value, str):
        return (c.name(value, where, s.buffers, "buffer"), 0, None)
    c.table(value, where)
    c.keys(value, where, ("buffer", "offset", "length"))
    if "buffer" not in value:
        c.fail(f"{where}.buffer", "missing (the buffer's name)")
    name = c.name(value["buffer"], f"{where}.buffer", s.buffers, "buffer")
    length = value.get("length")
    return (name, c.int(value.get("offset", 0), f"{where}.offset"),
            None if length is None else c.int(length, f"{where}.length", minimum=1))


def _timepoints(c, s, value, where) -> list:
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = []
        for i, p in enumerate(value):
            if not (isinstance(p, list) and len(p) == 2):
                c.fail(f"{where}[{i}]", "expected [semaphore, value]")
            pairs.append((p[0], p[1]))
    else:
        c.fail(where, f"expected a table {{semaphore = value}}, got {type(value).__name__}")
    return [(c.name(n, f"{where}.{n}", s.semaphores, "semaphore"), c.int(v, f"{where}.{n}")) for n, v in pairs]


def _data(c, value, where) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if not isinstance(value, list) or not value:
        c.fail(where, "expected a non-empty list of bytes (0..255) or a string")
    for i, b in enumerate(value):
        c.int(b, f"{where}[{i}]")
        if b > 255:
            c.fail(f"{where}[{i}]", f"a byte is 0..255, got {b}")
    return bytes(value)


def _body(c, s, d, where, kind) -> dict:
    """Fields shared by commands and queue steps of the same kind."""
    out = {}
    if kind == "fill":
        out["target"] = _ref(c, s, d.get("target"), f"{where}.target")
        out["pattern"] = c.int(d.get("pattern", 0), f"{where}.pattern")
        out["pattern_length"] = c.int(d.get("pattern_length", 4), f"{where}.pattern_length")
        if out["pattern_length"] not in (1, 2, 4):
            c.fail(f"{where}.pattern_length", f"must be 1, 2 or 4, got {out['pattern_length']}")
    elif kind == "copy":
        out["source"] = _ref(c, s, d.get("source"), f"{where}.source")
        out["target"] = _ref(c, s, d.get("target"), f"{where}.target")
    elif kind == "update":
        out["target"] = _ref(c, s, d.get("target"), f"{where}.target")
        out["data"] = _data(c, d.get("data"), f"{where}.data")
        name, offset, length = out["target"]
        if length is not None and length != len(out["data"]):  # (its length is the data's)
            c.fail(f"{where}.target", f"length {length} is not the data's ({len(out['data'])} bytes): "
                                      "give the buffer and offset only, or the data's length")
        out["target"] = (name, offset, len(out["data"]))
    elif kind == "dispatch":
        out["entry"] = c.str(d.get("entry"), f"{where}.entry")
        wg = d.get("workgroups", [1, 1, 1])
        if not isinstance(wg, list) or len(wg) != 3:
            c.fail(f"{where}.workgroups", "expected [x, y, z]")
        out["workgroups"] = tuple(c.int(x, f"{where}.workgroups[{i}]") for i, x in enumerate(wg))
        consts = d.get("constants", [])
        if not isinstance(consts, list):
            c.fail(f"{where}.constants", "expected a list of integers")
        out["constants"] = [c.int(x, f"{where}.constants[{i}]", minimum=-(2**31)) for i, x in enumerate(consts)]
        binds = d.get("bindings", [])
        if not isinstance(binds, list):
            c.fail(f"{where}.bindings", "expected a list of buffer references")
        out["bindings"] = [_ref(c, s, b, f"{where}.bindings[{i}]") for i, b in enumerate(binds)]
    return out


def check_command(c, s, d, where) -> dict:
    c.table(d, where)
    kind = c.str(d.get("cmd"), f"{where}.cmd", list(COMMAND_FIELDS))
    c.keys(d, where, ("cmd",) + COMMAND_FIELDS[kind])
    return {"cmd": kind, **_body(c, s, d, where, kind)}


def check_step(c, s, d, where) -> dict:
    c.table(d, where)
    call = c.str(d.get("call"), f"{where}.call", list(STEP_FIELDS))
    c.keys(d, where, ("call",) + STEP_FIELDS[call])
    out = {"call": call, "where": where}
    if "wait" in STEP_FIELDS[call]:
        out["wait"] = _timepoints(c, s, d.get("wait", {}), f"{where}.wait")
    if "signal" in STEP_FIELDS[call] and call != "signal":
        out["signal"] = _timepoints(c, s, d.get("signal", {}), f"{where}.signal")
    if "queue" in STEP_FIELDS[call]:
        out["queue"] = None if d.get("queue") is None else c.int(d["queue"], f"{where}.queue")
    out.update(_body(c, s, d, where, call))
    if call == "execute":
        out["command_buffer"] = c.name(d.get("command_buffer"), f"{where}.command_buffer",
                                       s.command_buffers, "command buffer")
    elif call == "copy":
        out["length"] = None if d.get("length") is None else c.int(d["length"], f"{where}.length", minimum=1)
    elif call == "alloca":
        out["name"] = c.str(d.get("name"), f"{where}.name")
        out["size"] = c.int(d.get("size"), f"{where}.size", minimum=1)
    elif call == "dealloca":
        out["buffer"] = c.name(d.get("buffer"), f"{where}.buffer", s.buffers, "buffer")
    elif call in ("signal", "fail"):
        out["semaphore"] = c.name(d.get("semaphore"), f"{where}.semaphore", s.semaphores, "semaphore")
        if call == "signal":
            out["value"] = c.int(d.get("value"), f"{where}.value")
        else:
            out["status"] = StatusCode[c.str(d.get("status", "ABORTED"), f"{where}.status",
                                             [x.name for x in StatusCode if x.name not in ("OK", "DEFERRED")])]
            out["message"] = c.str(d.get("message", ""), f"{where}.message")
    elif call == "wait":
        out["mode"] = c.str(d.get("mode", "all"), f"{where}.mode", ["all", "any"])
        out["timeout"] = None if d.get("timeout") is None else c.number(d["timeout"], f"{where}.timeout")
        if not out["wait"]:
            c.fail(f"{where}.wait", "a host wait needs at least one {semaphore = value}")
    elif call == "sleep":
        out["seconds"] = c.number(d.get("seconds"), f"{where}.seconds")
    elif call == "release":
        names = d.get("names")
        if not isinstance(names, list) or not names:
            c.fail(f"{where}.names", "expected a non-empty list of buffer, command buffer or semaphore names")
        known = {**s.buffers, **s.command_buffers, **s.semaphores, **{t: 0 for t in c.transients}}
        out["names"] = [c.name(n, f"{where}.names[{i}]", known, "resource") for i, n in enumerate(names)]
    return out
