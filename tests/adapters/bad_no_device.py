"""An adapter without DEVICE: refused when loaded (mla-check exits 2)."""


def pack(**_):
    pass
