"""tilecore backend `tvm`: tile programs lowered to Apache TVM TIR (imports tvm lazily)."""
