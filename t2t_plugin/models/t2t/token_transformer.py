from mmpretrain.registry import MODELS

from ..layers import TransformerLayer
from ..option_checks import Rule, check_options, check_positive


@MODELS.register_module()
class TokenTransformer(TransformerLayer):
    """The T2T transformer layer: one head, ``in_dims -> token_dims``.

    Two quirks of the official code, on which the released weights depend,
    are kept: the attention scale is ``in_dims ** -0.5`` (147 or 576, not
    the head width 64) and the attention residual is ``v``.
    """

    # reads the tokens of a soft split (see T2TModule)
    reads_map = False
    option_rules: dict[str, Rule] = dict(mlp_ratio=(check_positive,))

    def __init__(
        self,
        in_dims: int,
        token_dims: int = 64,
        mlp_ratio: float = 1.0,
        drop_rate: float = 0.0,
    ) -> None:
        check_options(type(self).__name__, self.option_rules, locals())
        super().__init__(
            embed_dims=token_dims,
            num_heads=1,
            feedforward_channels=int(token_dims * mlp_ratio),
            input_dims=in_dims,
            v_shortcut=True,
            qk_scale=in_dims**-0.5,
            drop_rate=drop_rate,
        )
