"""Driver registry and device creation by URI (DESIGN §4, HAL_SEMANTICS §A.8).

Drivers register under the ``halsim.drivers`` entry-point group (name = URI scheme), so a new device
is a new package, not an edit of a central switch. A URI is ``scheme[:path][?key=value&...]``, split
as IREE's ``iree_uri_split`` does: a ``//`` (or else one ``/``) after the colon is not part of the path,
so ``cuda://1``, ``cuda:/1`` and ``cuda:1`` all name path ``1``. Each driver takes its own paths and
refuses any other with NOT_FOUND naming it (:func:`default_path_only` for drivers of one device); options
may also be given as keyword arguments (which win over the query string).

>>> from reference import hal
>>> "local-task" in hal.available_drivers()
True
>>> hal.parse_uri("sim:metal?legacy_sync=1&queues=2")
('sim', 'metal', {'legacy_sync': '1', 'queues': '2'})
>>> hal.parse_uri("cuda://1"), hal.parse_uri("local-task://")
(('cuda', '1', {}), ('local-task', '', {}))
"""

from __future__ import annotations

import functools
import importlib.metadata
import urllib.parse
from typing import Any, Mapping, NamedTuple

from .status import HalError, StatusCode

ENTRY_POINT_GROUP = "halsim.drivers"


class DeviceInfo(NamedTuple):
    """A device a driver offers: enough for the CTS to parametrize over it without creating it."""

    uri: str
    name: str
    capabilities: frozenset
    cts_unsupported: Mapping[str, str]  # "Suite.Test" → why IREE does not run it on such a device
    description: str = ""


class Driver:
    """Base class of a registered driver. Subclasses set ``name``, ``options`` (name → default, whose
    type is used to parse URI strings) and implement ``query_available_devices`` and ``_create``."""

    name: str = ""
    options: Mapping[str, Any] = {}

    def query_available_devices(self) -> list[DeviceInfo]:
        raise NotImplementedError

    def _create(self, path: str, options: dict):
        raise NotImplementedError

    def create_device(self, path: str = "", **options):
        return self._create(path, self.parse_options(options))

    def parse_options(self, given: Mapping[str, Any]) -> dict:
        out = dict(self.options)
        for key, value in given.items():
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise HalError(StatusCode.INVALID_ARGUMENT,
                               f"unknown option {key!r} for driver {self.name!r} (known: {known})")
            out[key] = coerce_option(key, value, self.options[key])
        return out


def coerce_option(key: str, value, default):
    """Parse a URI string (or check a keyword value) against the type of the option's default."""
    kind = type(default)
    try:
        if isinstance(value, str) and kind is not str and default is not None:
            if kind is bool:
                low = value.lower()
                if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                return low in ("1", "true", "yes", "on")
            return kind(value)
        if default is None or isinstance(value, kind) or (kind is float and isinstance(value, int)):
            return value
        raise ValueError
    except ValueError:
        raise HalError(StatusCode.INVALID_ARGUMENT,
                       f"option {key}={value!r} must be of type {kind.__name__}") from None


def parse_uri(uri: str) -> tuple[str, str, dict]:
    if not isinstance(uri, str) or not uri:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"device uri must be a non-empty string, got {uri!r}")
    head, _, query = uri.partition("?")
    scheme, _, path = head.partition(":")
    # iree_uri_split: "The // isn't required but does make things more URI-like" (else one "/" goes)
    path = path[2:] if path.startswith("//") else path.removeprefix("/")
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"device uri {uri!r}: malformed query string {query!r}") from None
    options = {}
    for k, v in pairs:
        if k in options:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"device uri {uri!r}: option {k!r} given twice")
        options[k] = v
    return scheme, path, options


def unsupported_path(scheme: str, path: str, accepted: str | None = None) -> HalError:
    """NOT_FOUND naming a device ``path`` driver ``scheme`` does not take and saying what it does
    (``accepted``; by default: one device, the empty path)."""
    accepted = accepted or f"{scheme} has one device: the empty path, {scheme} or {scheme}://"
    return HalError(StatusCode.NOT_FOUND, f"{scheme}: unsupported device path {path!r} ({accepted})")


def default_path_only(scheme: str, path: str, accepted: str | None = None) -> None:
    """The path check of a driver with one device per configuration: only the empty path (IREE's
    local-task and local-sync refuse any other: NOT_FOUND "device paths not yet implemented")."""
    if path:
        raise unsupported_path(scheme, path, accepted)


@functools.lru_cache(maxsize=None)
def _registry() -> dict[str, Any]:
    found = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def available_drivers() -> list[str]:
    """Names (URI schemes) of every registered driver, sorted."""
    return sorted(_registry())


def get_driver(name: str) -> Driver:
    ep = _registry().get(name)
    if ep is None:
        known = ", ".join(available_drivers()) or "none (is the project installed?)"
        raise HalError(StatusCode.NOT_FOUND, f"no driver named {name!r} (registered: {known})")
    return _load(name)


@functools.lru_cache(maxsize=None)
def _load(name: str) -> Driver:
    obj = _registry()[name].load()
    return obj() if isinstance(obj, type) else obj


def available_devices() -> list[DeviceInfo]:
    """Every device every registered driver can create here (drivers whose hardware is absent offer none)."""
    out = []
    for name in available_drivers():
        try:
            out.extend(get_driver(name).query_available_devices())
        except HalError as e:
            if e.code != StatusCode.UNAVAILABLE:
                raise
    return out


def create_device(uri: str, **options):
    """Create a device: ``create_device("local-task")``, ``create_device("sim:metal?queues=2")``.

    Unknown driver → NOT_FOUND; unknown or malformed option → INVALID_ARGUMENT; absent hardware → UNAVAILABLE.
    """
    scheme, path, uri_options = parse_uri(uri)
    uri_options.update(options)
    return get_driver(scheme).create_device(path, **uri_options)
