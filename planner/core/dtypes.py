"""Element types a buffer may declare (``Buffer.dtype``), for the emitters' typed pointers."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DTYPES", "DType"]


@dataclass(frozen=True)
class DType:
    """One element type: its width and its spelling in CUDA C++ and in MLIR."""

    name: str
    bytes: int  # element width
    cuda: str
    mlir: str


DTYPES: dict[str, DType] = {
    t.name: t
    for t in (
        DType("u8", 1, "unsigned char", "i8"),
        DType("i8", 1, "signed char", "i8"),
        DType("u16", 2, "unsigned short", "i16"),
        DType("i16", 2, "short", "i16"),
        DType("f16", 2, "__half", "f16"),
        DType("bf16", 2, "__nv_bfloat16", "bf16"),
        DType("u32", 4, "unsigned int", "i32"),
        DType("i32", 4, "int", "i32"),
        DType("f32", 4, "float", "f32"),
        DType("u64", 8, "unsigned long long", "i64"),
        DType("i64", 8, "long long", "i64"),
        DType("f64", 8, "double", "f64"),
    )
}
