"""What every kernel of the configuration and the plan answers of its name (`module:function`) and targets,
whatever the language: Triton's `TritonEntry`, the CuTe DSL's `CuteEntry`, and the compile plan's kernels."""

from __future__ import annotations


class KernelName:
    """Mixed into a dataclass whose `kernel` is "module:function"."""

    kernel: str

    @property
    def module(self) -> str:
        return self.kernel.split(":", 1)[0]

    @property
    def function(self) -> str:
        return self.kernel.split(":", 1)[1]


class KernelEntry(KernelName):
    """Mixed into a configuration entry that has `targets` (None: every target of the run) besides `kernel`."""

    targets: tuple[str, ...] | None

    def builds_for(self, target: str) -> bool:
        return self.targets is None or target in self.targets
