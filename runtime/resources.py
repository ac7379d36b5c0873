"""Kubernetes resource quantities and pod resource requests, computed exactly as the kubelet and scheduler do.

Go origin: `k8s.io/apimachinery/pkg/api/resource` (`Quantity`: `ParseQuantity`, `Add`, `Cmp`, `Value`,
`String`/`MarshalJSON` and `CanonicalizeBytes`), `k8s.io/component-helpers/resource.PodRequests` (what a pod
asks the scheduler for), and the two helpers of kubeflow/trainer `pkg/runtime/runtime.go` that read a
container's resources (`GetNumGPUPerNode`, and the Torch plugin's CPU count).

Guarantees:
- Arithmetic is exact: a quantity is a `Fraction`, rounded up (away from zero) to the nano unit once at
  parse time like Go (`1.0000000001` reads as `1000000001n`, `1e-999999999` as `1n`). No float ever
  touches a value; a JSON number is read through the text Go's `encoding/json` writes for it.
- `str(q)` is byte for byte what Go writes for the same quantity (checked against apimachinery v0.36.3 on
  tens of thousands of random strings). That is the canonical form (`canonical()`: `1500m`, `1536Mi`,
  `12e6`; BinarySI under 1024, or not whole, prints as decimal; a sum takes the format of its first
  non-zero operand, as Go's `Add`), except that Go keeps the text of a parsed quantity that its fast
  path considers canonical already, sign and leading zeros included: `+1`, `01`, `1E3`, `1e+3` and
  `1.Ki` are written back unchanged (`Quantity.text`). Arithmetic drops that text, as Go's does.
- Parsing takes time and memory linear in the text, whatever the exponent: digits far below the nano
  unit only decide the rounding, and more than 100 significant digits or a magnitude of 1e100 or more
  is refused with `InvalidQuantityError` (BinarySI is capped at 2**63-1 first, as Go caps it:
  `999999999999Ei` reads as `9223372036854775807`). Kubernetes has no such bound; it hangs on
  `1e-999999999`, and truncates an exponent past 32 bits (`1e9999999999` prints as `10e1410065406`).
- `pod_requests` follows the sidecar KEP formula: the sum of regular containers, plus restartable init
  containers (`restartPolicy: Always`) as sidecars, against the max of each ordinary init container (plus
  the sidecars started before it); pod-level `resources.requests` for cpu, memory and hugepages override
  the container sum; `overhead` is added. Limits never count (as upstream's `SinglePodRequests`: a GPU
  given only as a limit contributes nothing to a PodGroup's `minResources`).
- `gpu_count` is deterministic (upstream takes the first name containing "gpu" in Go's random map order):
  resource names are read in sorted order, so when several names contain "gpu" the same one wins on every
  run.

Deliberate differences from Go, each where Go writes a different value than it holds:
- A DecimalSI value of 1e21 or more has no suffix; Go prints the mantissa alone (`1000E` → `1`, a
  thousandth of a millionth of the value) where this prints the exponent form (`1e21`).
- A BinarySI value that is a multiple of 1024 Ei (only reachable by arithmetic: Go caps parsed values)
  keeps the `Ei` suffix with a larger mantissa (`1024Ei`) where Go prints the mantissa alone (`1`).
- A number without any digit (`.`, `+`) is refused; Go reads it as 0, but the API server's schema
  pattern for quantities never lets one through.

Also missing: in-place resize and DRA status inputs of `PodRequests` (a template has no status), and
`PodLimits`.
"""

from __future__ import annotations

import decimal
import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "Format",
    "InvalidQuantityError",
    "Quantity",
    "ResourceList",
    "add_resource_lists",
    "cpu_count",
    "cpu_resource",
    "format_resource_list",
    "gpu_count",
    "gpu_resource",
    "max_resource_lists",
    "parse_resource_list",
    "pod_requests",
    "sum_quantities",
]


class InvalidQuantityError(ValueError):
    """A string (or number) that is not a Kubernetes quantity."""


class Format(enum.Enum):
    """How a quantity prints (Go `resource.Format`)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {e: s for s, e in _BINARY_SUFFIXES.items()}
_NANO = Fraction(1, 10**9)
_MAX_INT64 = 2**63 - 1
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_LOG10_2 = 0.30103  # a hair above log10(2): digit estimates below err on the large side
_MAX_DIGITS = 100
_MAX_MAGNITUDE = 100
"""Quantities are refused beyond 100 significant digits or 1e100, where Go keeps any size: no resource comes
near (int64, Go's cap for binary quantities, is below 1e19), and the bound keeps parsing and printing cheap
for input such as `1e999999999`, which one tenant may write and every reconcile would parse."""
_MAX_BITS = math.ceil(_MAX_MAGNITUDE / _LOG10_2)


def _shown(text: str) -> str:
    """`text` quoted for an error message, cut short: a quantity is as long as the request holding it."""
    return repr(text) if len(text) <= 64 else f"{text[:48]!r}... ({len(text)} characters)"


def _scan(text: str) -> tuple[bool, str, str, str]:
    """(positive, integer digits, fraction digits, suffix): Go's `parseQuantityString`, leading zeros dropped.

    Raises `InvalidQuantityError` where Go returns `ErrFormatWrong`, and for a number without any digit
    (".", "+"), which Go reads as 0 but the API server's schema pattern for quantities never lets through.
    """
    end = len(text)
    pos = 0
    positive = True
    if pos < end and text[pos] in "+-":
        positive = text[pos] == "+"
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        frac_start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        frac = text[frac_start:pos]
    if not whole and not frac:
        raise InvalidQuantityError(f"quantities must match the Kubernetes quantity syntax: {_shown(text)}")
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise InvalidQuantityError(f"quantities must match the Kubernetes quantity syntax: {_shown(text)}")
    return positive, whole.lstrip("0") or "0", frac, text[suffix_start:]


def _interpret(suffix: str, text: str) -> tuple[int, int, Format]:
    """(power of ten, power of two, format) of a suffix: Go's `quantitySuffixer.interpret`."""
    if suffix in _DECIMAL_SUFFIXES:
        return _DECIMAL_SUFFIXES[suffix], 0, Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 0, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    exponent = suffix[1:]
    digits = exponent[1:] if exponent[:1] in ("+", "-") else exponent
    # Go parses the exponent as an int64 (then silently truncates it to int32, which this does not do).
    if len(suffix) > 1 and suffix[0] in "eE" and digits and set(digits) <= _DIGITS and len(digits) <= 19:
        return int(exponent), 0, Format.DECIMAL_EXPONENT
    raise InvalidQuantityError(f"unable to parse quantity's suffix: {_shown(text)}")


def _go_cached_text(text: str, *, whole: str, frac: str, power10: int, power2: int, fmt: Format) -> bool:
    """Whether Go's `ParseQuantity` keeps `text` as the quantity's string (its fast path's canonical test).

    Go prints that string back as it was written, sign and leading zeros included (`+1`, `01`, `1E3`,
    `1e+3`), so this decides whether Go's output differs from the canonical form.
    """
    if text == "0":
        return True
    digits = whole + frac
    if fmt is Format.BINARY_SI:
        if frac:
            return False
        # Go's precision estimate: 1Mi (2^20) has about six decimal digits.
        precision = 15 - len(whole) - int(power2 * 3 / 10) - 1
        return precision >= 0 and int(digits) * 2**power2 <= _MAX_INT64 and int(digits) & 0x07 != 0
    precision = 18 - len(digits)
    scale = power10 - len(frac)
    return (
        precision >= 0 and scale >= -9 and scale % 3 == 0 and not digits.endswith("000") and digits[0] != "0"
    )


def _exact_value(text: str, *, whole: str, frac: str, power10: int, power2: int, fmt: Format) -> Fraction:
    """The magnitude, rounded up to the nano unit as Go does, without ever building a huge number.

    Digits far below the nano unit only decide the rounding, so they are folded into one "sticky" half
    unit of the last digit kept; magnitudes of 1e100 and more are refused (BinarySI is capped
    at 2**63-1 first, as in Go).
    """
    significant = (whole + frac).lstrip("0")
    if len(significant) > _MAX_DIGITS:
        raise InvalidQuantityError(f"quantities must have at most {_MAX_DIGITS} significant digits")
    if not significant:
        return Fraction(0)
    last = power10 - len(frac)  # the power of ten of the last digit written
    binary_digits = math.ceil(power2 * _LOG10_2)
    top = len(significant) + last + binary_digits  # the value is below 10**top
    if fmt is Format.BINARY_SI and top - 1 - binary_digits + math.floor(power2 * 0.30102) > 19:
        return Fraction(_MAX_INT64)  # certainly above 2**63 - 1
    if top > _MAX_MAGNITUDE:
        raise InvalidQuantityError(f"quantities must be less than 1e{_MAX_MAGNITUDE}: {_shown(text)}")
    lowest = -9 - binary_digits - 1  # digits below 10**lowest cannot change the rounded value
    sticky = False
    if last < lowest:
        dropped = lowest - last
        kept, rest = significant[:-dropped], significant[-dropped:]
        sticky = rest.strip("0") != ""
        significant, last = kept or "0", lowest
    if last >= -9:  # a whole number of nano units: one exact integer, no rounding (the common case)
        value = Fraction(int(significant) * 10 ** (last + 9) * 2**power2, 10**9)
        if fmt is Format.BINARY_SI and value > _MAX_INT64:
            value = Fraction(_MAX_INT64)
        return value
    value = int(significant) * Fraction(10) ** last * 2**power2
    if sticky:
        value += Fraction(10) ** last * 2**power2 / 2
    value = Fraction(math.ceil(value / _NANO)) * _NANO
    if fmt is Format.BINARY_SI and value > _MAX_INT64:
        value = Fraction(_MAX_INT64)
    return value


def _go_json_number(number: float) -> str:
    """A float as Go's `encoding/json` writes it (what the API server sends): `0.00001`, `1e+21`, `1e-7`."""
    if not math.isfinite(number):
        raise InvalidQuantityError(f"quantities must be finite numbers, not {number!r}")
    text = repr(number)  # the shortest digits that read back as the same float, as Go's
    if number == 0 or 1e-6 <= abs(number) < 1e21:
        text = format(decimal.Decimal(text), "f")
        return text.removesuffix(".0")
    return re.sub(r"e-0([0-9])$", r"e-\1", text)  # Go writes e-7 where Python writes e-07


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """An exact Kubernetes quantity. Compare, add and multiply it; `str()` prints what Go prints.

    `text` is Go's cached string: the quantity as written, kept by `parse` only when Go's parser keeps it
    (see `_go_cached_text`); arithmetic drops it, as Go's `Add` and `Mul` clear it.
    """

    value: Fraction
    format: Format = Format.DECIMAL_SI
    text: str | None = None

    @classmethod
    def parse(cls, raw: str | int | float) -> Quantity:
        """Parse a quantity as Go's `resource.ParseQuantity` does; numbers are read via their JSON text.

        Raises `InvalidQuantityError` for anything Go rejects, for a number without digits, and for a
        magnitude of 1e100 or more or more than 100 significant digits. Time and memory are linear in
        the length of the text.
        """
        if isinstance(raw, bool):
            raise InvalidQuantityError(f"quantities must be strings or numbers, not {raw!r}")
        if isinstance(raw, int):
            if raw.bit_length() > _MAX_BITS:  # str() of an int this long is slow, then refused by Python
                raise InvalidQuantityError(f"quantities must be less than 1e{_MAX_MAGNITUDE}")
            text = str(raw)
        elif isinstance(raw, float):
            text = _go_json_number(raw)
        elif isinstance(raw, str):
            text = raw
        else:
            raise InvalidQuantityError(f"quantities must be strings or numbers, not {type(raw).__name__}")
        positive, whole, frac, suffix = _scan(text)
        power10, power2, fmt = _interpret(suffix, text)
        value = _exact_value(text, whole=whole, frac=frac, power10=power10, power2=power2, fmt=fmt)
        if fmt is Format.BINARY_SI and 0 < value < 1:
            fmt = Format.DECIMAL_SI
        go_keeps_text = _go_cached_text(text, whole=whole, frac=frac, power10=power10, power2=power2, fmt=fmt)
        cached = text if go_keeps_text else None
        return cls(value if positive else -value, fmt, cached)

    @classmethod
    def zero(cls) -> Quantity:
        return cls(Fraction(0))

    def is_zero(self) -> bool:
        return self.value == 0

    def ceil(self) -> int:
        """The value rounded up to an integer (Go `Quantity.Value()`): `500m` → 1."""
        return math.ceil(self.value)

    def __add__(self, other: Quantity) -> Quantity:
        # Go's Add keeps the receiver's format unless the receiver is zero.
        return Quantity(self.value + other.value, other.format if self.is_zero() else self.format)

    def __mul__(self, factor: int) -> Quantity:
        return Quantity(self.value * factor, self.format)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __gt__(self, other: Quantity) -> bool:
        return self.value > other.value

    def __ge__(self, other: Quantity) -> bool:
        return self.value >= other.value

    def __str__(self) -> str:
        """What Go's `String()` and `MarshalJSON` write: the cached text if any, else `canonical()`."""
        return self.text if self.text is not None else self.canonical()

    def canonical(self) -> str:
        """Go's canonical form (`CanonicalizeBytes`), with two value-preserving fixes (see the module doc).

        Zero is `0`. BinarySI prints the largest binary suffix that divides the value (`1536Mi`), or a
        plain decimal under 1024 in magnitude or when the value is not an integer. DecimalSI and
        DecimalExponent print the smallest integer mantissa with an exponent that is a multiple of 3
        (`1500m`, `12e6`).
        """
        if self.value == 0:
            return "0"
        fmt = self.format
        if fmt is Format.BINARY_SI and (-1024 < self.value < 1024 or self.value.denominator != 1):
            fmt = Format.DECIMAL_SI
        if fmt is Format.BINARY_SI:
            mantissa, exponent = int(self.value), 0
            while mantissa % 1024 == 0 and exponent < 60:  # Go would drop the suffix past Ei
                mantissa //= 1024
                exponent += 10
            return f"{mantissa}{_BINARY_BY_EXPONENT.get(exponent, '')}"
        mantissa, exponent = _decimal_mantissa(self.value)
        if fmt is Format.DECIMAL_SI and exponent in _DECIMAL_BY_EXPONENT:
            return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
        # DecimalExponent, or a DecimalSI value past exa, where Go would drop the suffix (`1000E` → `1`).
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _decimal_mantissa(value: Fraction) -> tuple[int, int]:
    """(m, e) with value == m * 10**e, e a multiple of 3, m an integer with no spare factor of 1000."""
    exponent = 0
    while value.denominator != 1:  # at most 9 steps: values are multiples of 1n
        value *= 10
        exponent -= 1
    mantissa = int(value)
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent


ResourceList = dict[str, Quantity]
"""Resource name → quantity (Go `corev1.ResourceList`)."""


def parse_resource_list(raw: Mapping[str, Any] | None) -> ResourceList:
    """Parse a wire `ResourceList` (`{"cpu": "500m", "nvidia.com/gpu": 1}`)."""
    return {name: Quantity.parse(value) for name, value in (raw or {}).items()}


def format_resource_list(resources: Mapping[str, Quantity]) -> dict[str, str]:
    """The wire form of a resource list, canonical quantities, names sorted."""
    return {name: str(resources[name]) for name in sorted(resources)}


def add_resource_lists(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    """`into += other`, name by name (Go `addResourceList`)."""
    for name, quantity in other.items():
        into[name] = into[name] + quantity if name in into else quantity


def max_resource_lists(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    """`into = max(into, other)`, name by name (Go `maxResourceList`)."""
    for name, quantity in other.items():
        if name not in into or quantity > into[name]:
            into[name] = quantity


def _requests(container: Mapping[str, Any]) -> ResourceList:
    return parse_resource_list((container.get("resources") or {}).get("requests"))


def _is_pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_requests(pod_spec: Mapping[str, Any]) -> ResourceList:
    """What one pod of this spec requests from the scheduler (Go `resourcehelpers.PodRequests`, defaults).

    Raises `InvalidQuantityError` when a request is not a quantity.
    """
    requests: ResourceList = {}
    for container in pod_spec.get("containers") or ():
        add_resource_lists(requests, _requests(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in pod_spec.get("initContainers") or ():
        own = _requests(container)
        if container.get("restartPolicy") == "Always":
            # A sidecar runs for the pod's whole life and for every init container started after it.
            add_resource_lists(requests, own)
            add_resource_lists(sidecars, own)
            in_use = dict(sidecars)
        else:
            in_use = dict(own)
            add_resource_lists(in_use, sidecars)
        max_resource_lists(init_peak, in_use)
    max_resource_lists(requests, init_peak)
    pod_level = parse_resource_list((pod_spec.get("resources") or {}).get("requests"))
    if any(_is_pod_level_resource(name) for name in pod_level):
        requests.update((name, q) for name, q in pod_level.items() if _is_pod_level_resource(name))
    add_resource_lists(requests, parse_resource_list(pod_spec.get("overhead")))
    return requests


def _first_gpu(resources: Mapping[str, Any] | None) -> tuple[str, int] | None:
    for name in sorted(resources or {}):
        if "gpu" in name.lower():
            return name, Quantity.parse((resources or {})[name]).ceil()
    return None


def gpu_resource(requirements: Mapping[str, Any] | None) -> tuple[str, str, int] | None:
    """Which resource `gpu_count` reads: (`requests` or `limits`, the name, the count), or None for 0."""
    if not requirements:
        return None
    for key in ("requests", "limits"):
        found = _first_gpu(requirements.get(key))
        if found is not None and found[1]:
            return key, found[0], found[1]
    return None


def gpu_count(requirements: Mapping[str, Any] | None) -> int:
    """GPUs per node in a container's `resources` (Go `GetNumGPUPerNode`), deterministically.

    The first resource name (in sorted order) that contains "gpu", case-insensitively, in `requests`;
    if that is absent or zero, the same rule on `limits`. Values round up (`500m` → 1).
    """
    found = gpu_resource(requirements)
    return found[2] if found is not None else 0


def cpu_resource(requirements: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """Which resource `cpu_count` reads: (`requests` or `limits`, the count), or None for 0."""
    if not requirements:
        return None
    # Only the `cpu` entries are read (parsing the whole lists cost a tenant's 30,000 resources 0.3 s).
    requests, limits = requirements.get("requests") or {}, requirements.get("limits") or {}
    if "cpu" in requests and not (cpu := Quantity.parse(requests["cpu"])).is_zero():
        return "requests", cpu.ceil()
    return ("limits", Quantity.parse(limits["cpu"]).ceil()) if "cpu" in limits else None


def cpu_count(requirements: Mapping[str, Any] | None) -> int:
    """CPUs per node in a container's `resources` (the Torch plugin's `getNumCPUPerNode`).

    `requests.cpu` rounded up when set and non-zero, else `limits.cpu` rounded up, else 0.
    """
    found = cpu_resource(requirements)
    return found[1] if found is not None else 0


def sum_quantities(quantities: Iterable[Quantity]) -> Quantity:
    """The sum of quantities (zero for none), with Go's format rule."""
    total = Quantity.zero()
    for quantity in quantities:
        total = total + quantity
    return total
