"""Kubernetes resource quantities and pod resource requests, computed exactly as the kubelet and scheduler do.

Go origin: `k8s.io/apimachinery/pkg/api/resource` (`Quantity`: parsing, `Add`, `Cmp`, `Value`, the canonical
`String()`), `k8s.io/component-helpers/resource.PodRequests` (what a pod asks the scheduler for), and the two
helpers of kubeflow/trainer `pkg/runtime/runtime.go` that read a container's resources (`GetNumGPUPerNode`,
and the Torch plugin's CPU count).

Guarantees:
- Arithmetic is exact: a quantity is a `Fraction`, rounded up to the nano unit once at parse time like Go
  (`1.0000000001` reads as `1000000001n`). No float ever touches a value.
- `str(q)` is Go's canonical form: `1500m`, `408Gi`, `1536Mi` (binary values that are not a whole number of
  a binary unit fall back to decimal), `1e3` keeps the exponent format. The format of a sum is the format of
  its first non-zero operand, as in Go's `Quantity.Add`.
- `pod_requests` follows the sidecar KEP formula: the sum of regular containers, plus restartable init
  containers (`restartPolicy: Always`) as sidecars, against the max of each ordinary init container (plus
  the sidecars started before it); pod-level `resources.requests` for cpu, memory and hugepages override
  the container sum; `overhead` is added. Limits never count (as upstream: a GPU given only as a limit
  contributes nothing to a PodGroup's `minResources`).
- `gpu_count` is deterministic (upstream picks from a Go map, at random): names are read sorted, so when
  several names contain "gpu" the same one wins on every run.
- Parsing takes bounded time and memory whatever the text: more than 100 significant digits, an
  exponent beyond 64 bits or a value of 1e100 or more is an `InvalidQuantityError` (Go keeps any size;
  no resource comes near), and values below 1n round up to 1n without being built digit by digit.

Deliberately missing: `DecimalExponent` rounding subtleties of numbers beyond int64 (values are kept exact
here, where Go would cap BinarySI at 2^63-1 -- that cap is applied), in-place resize and DRA status inputs
of `PodRequests` (a template has no status), and `PodLimits`.
"""

from __future__ import annotations

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
    "format_resource_list",
    "gpu_count",
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
_MAX_DIGITS = 100
_MAX_MAGNITUDE = 100
"""Quantities are refused beyond 100 significant digits or 1e100, where Go keeps any size: no resource comes
near (int64, Go's cap for binary quantities, is below 1e19), and the bound keeps parsing and printing cheap
for input such as `1e999999999`, which one tenant may write and every reconcile would parse."""
# sign, integer digits, fraction digits, suffix; the number must have at least one digit (Go's CRD pattern).
_QUANTITY_RE = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?([a-zA-Z]*[-+]?[0-9]*)$")


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """An exact Kubernetes quantity. Compare, add and multiply it; `str()` prints Go's canonical form."""

    value: Fraction
    format: Format = Format.DECIMAL_SI

    @classmethod
    def parse(cls, raw: str | int | float) -> Quantity:
        """Parse a quantity as Go's `resource.ParseQuantity` does (numbers are read via their JSON text)."""
        if isinstance(raw, bool):
            raise InvalidQuantityError(f"quantities must be strings or numbers, not {raw!r}")
        text = str(raw) if isinstance(raw, (int, float)) else raw
        if not isinstance(text, str):
            raise InvalidQuantityError(f"quantities must be strings or numbers, not {type(raw).__name__}")
        match = _QUANTITY_RE.match(text)
        if match is None or not (match.group(2) or match.group(3)):
            raise InvalidQuantityError(f"quantities must match the Kubernetes quantity syntax: {text!r}")
        sign, whole, frac, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4)
        # Bounded work whatever the text: the significant digits and the decimal exponent are checked
        # before any power of ten is built (`1e999999999` would otherwise take gigabytes).
        digits = (whole + frac).lstrip("0")
        if len(digits) > _MAX_DIGITS:
            raise InvalidQuantityError(f"quantities must have at most {_MAX_DIGITS} significant digits")
        number = Fraction(int(digits or "0"), 10 ** len(frac))
        if suffix in _DECIMAL_SUFFIXES:
            fmt, exponent = Format.DECIMAL_SI, _DECIMAL_SUFFIXES[suffix]
        elif suffix in _BINARY_SUFFIXES:
            fmt, exponent = Format.BINARY_SI, 0
            number *= 2 ** _BINARY_SUFFIXES[suffix]
        elif 1 < len(suffix) <= 20 and suffix[0] in "eE" and re.fullmatch(r"[-+]?[0-9]+", suffix[1:]):
            fmt, exponent = Format.DECIMAL_EXPONENT, int(suffix[1:])  # Go: a 64-bit exponent, else an error
        else:
            raise InvalidQuantityError(f"unable to parse quantity's suffix: {text!r}")
        magnitude = len(digits) - len(frac) + exponent  # number * 10**exponent < 10**magnitude
        if number and magnitude > _MAX_MAGNITUDE:
            raise InvalidQuantityError(f"quantities must be less than 1e{_MAX_MAGNITUDE}: {text!r}")
        if not number:
            value = Fraction(0)
        elif magnitude < -9:
            value = _NANO  # below one nano unit: Go rounds it up to 1n
        else:
            value = number * Fraction(10) ** exponent
        # Go rounds every non-zero value up (away from zero) to the nano unit.
        value = Fraction(math.ceil(value / _NANO)) * _NANO
        if fmt is Format.BINARY_SI and value > _MAX_INT64:
            value = Fraction(_MAX_INT64)
        if fmt is Format.BINARY_SI and 0 < value < 1:
            fmt = Format.DECIMAL_SI
        return cls(-value if sign == "-" else value, fmt)

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
        if self.value == 0:
            return "0"
        fmt = self.format
        if fmt is Format.BINARY_SI and (-1024 < self.value < 1024 or self.value.denominator != 1):
            fmt = Format.DECIMAL_SI
        if fmt is Format.BINARY_SI:
            mantissa, exponent = int(self.value), 0
            while mantissa % 1024 == 0 and exponent < 60:
                mantissa //= 1024
                exponent += 10
            return f"{mantissa}{_BINARY_BY_EXPONENT.get(exponent, '')}"
        mantissa, exponent = _decimal_mantissa(self.value)
        if fmt is Format.DECIMAL_EXPONENT:
            return f"{mantissa}e{exponent}" if exponent else str(mantissa)
        return f"{mantissa}{_DECIMAL_BY_EXPONENT.get(exponent, '')}"

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


def _first_gpu(resources: Mapping[str, Any] | None) -> int:
    for name in sorted(resources or {}):
        if "gpu" in name.lower():
            return Quantity.parse((resources or {})[name]).ceil()
    return 0


def gpu_count(requirements: Mapping[str, Any] | None) -> int:
    """GPUs per node in a container's `resources` (Go `GetNumGPUPerNode`), deterministically.

    The first resource name (in sorted order) that contains "gpu", case-insensitively, in `requests`;
    if that is absent or zero, the same rule on `limits`. Values round up (`500m` → 1).
    """
    if not requirements:
        return 0
    from_requests = _first_gpu(requirements.get("requests"))
    return from_requests or _first_gpu(requirements.get("limits"))


def cpu_count(requirements: Mapping[str, Any] | None) -> int:
    """CPUs per node in a container's `resources` (the Torch plugin's `getNumCPUPerNode`).

    `requests.cpu` rounded up when set and non-zero, else `limits.cpu` rounded up, else 0.
    """
    if not requirements:
        return 0
    requests = parse_resource_list(requirements.get("requests"))
    if "cpu" in requests and not requests["cpu"].is_zero():
        return requests["cpu"].ceil()
    limits = parse_resource_list(requirements.get("limits"))
    return limits["cpu"].ceil() if "cpu" in limits else 0


def sum_quantities(quantities: Iterable[Quantity]) -> Quantity:
    """The sum of quantities (zero for none), with Go's format rule."""
    total = Quantity.zero()
    for quantity in quantities:
        total = total + quantity
    return total
