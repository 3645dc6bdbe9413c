"""Schemas of the ``recipe.inference`` and ``recipe.sdc`` sections of a SKU profile or overlay.

Validated when the profile is loaded (a mistake is a configuration error naming
the file, the line and the field), with the probes' defaults; see
docs/probes.md (inference, sdc) for what each parameter does.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

__all__ = ["InferenceRecipe", "SdcRecipe", "VllmRecipe"]

PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
ServeDtype = Literal["fp32", "bf16", "fp16"]


class VllmRecipe(BaseModel):
    """Recipe ``inference.vllm``: ``vllm bench throughput`` on a checkpoint already on the node."""

    model_config = ConfigDict(extra="forbid")

    model: Annotated[StrictStr, Field(min_length=1, pattern=r"^/")] | None = None
    input_len: PositiveInt = 512
    output_len: PositiveInt = 128
    num_prompts: PositiveInt = 200
    dtype: Literal["auto", "float16", "bfloat16", "float32"] | None = None
    tensor_parallel_size: PositiveInt | None = None


class InferenceRecipe(BaseModel):
    """Recipe ``inference``: the built-in model's shape and the serving run (tokens, batch sizes)."""

    model_config = ConfigDict(extra="forbid")

    width: PositiveInt = 2048
    depth: PositiveInt = 4
    heads: PositiveInt = 16
    vocab: PositiveInt = 32000
    prompt_len: PositiveInt = 512
    batch_sizes: Annotated[list[PositiveInt], Field(min_length=1)] = [1, 16, 64]
    new_tokens: Annotated[StrictInt, Field(ge=2)] = 64
    check_tokens: PositiveInt = 8
    repeats: PositiveInt = 3
    seed: StrictInt = 1234
    threads: PositiveInt | None = None
    dtypes: Annotated[list[ServeDtype], Field(min_length=1)] | None = None
    vllm: VllmRecipe | None = None

    @model_validator(mode="after")
    def _width_divides(self) -> InferenceRecipe:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not a multiple of heads {self.heads}")
        return self


class SdcRecipe(BaseModel):
    """Recipe ``sdc``: the deterministic workloads every GPU runs (shapes, steps, seed, CPU threads)."""

    model_config = ConfigDict(extra="forbid")

    dtypes: Annotated[list[Literal["fp32", "bf16", "fp16", "fp64"]], Field(min_length=1)] | None = None
    size: PositiveInt | None = None
    chain: PositiveInt = 16
    steps: NonNegativeInt = 5
    seed: StrictInt = 20240611
    threads: PositiveInt = 1
