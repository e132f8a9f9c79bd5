"""An adapter whose import fails: refused when loaded with the traceback's tail (exit 2)."""
import module_that_does_not_exist  # noqa: F401

DEVICE = "cpu"
