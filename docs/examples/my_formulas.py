"""An example `--formulas FILE.py`: the cost of a custom op `mylib::fused_bias_gelu(Tensor x, Tensor bias)`,
y = gelu(x + bias). `nsroof profile --formulas docs/examples/my_formulas.py -- python train.py` (or
`nsroof analyze TRACE --formulas …`) then costs every `mylib::fused_bias_gelu` call from its recorded shapes."""

import nsroof
from nsroof import Tensor, Term


@nsroof.formula("mylib::fused_bias_gelu", source="y = gelu(x + b): 1 add + 5 for gelu per element")
def fused_bias_gelu(x: Tensor, bias: Tensor) -> list[Term]:
    return [
        Term("read x", bytes=x.nbytes, note="every element once"),
        Term("read bias", bytes=bias.nbytes, note="broadcast, read once"),
        Term("write y", bytes=x.nbytes, note="same shape and dtype as x"),
        Term("add + gelu", flops=6.0 * x.numel, note="6 per element"),
    ]
