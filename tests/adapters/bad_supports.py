"""An adapter whose SUPPORTS gives heads as a number instead of a list: refused when loaded (exit 2)."""
DEVICE = "cpu"
SUPPORTS = {"pack": {"heads": 128}}


def pack(**_):
    pass
