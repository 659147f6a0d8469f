"""The error every warehouse backend raises for a warehouse that cannot do what was asked (one line, no path
of a password)."""


class WarehouseError(RuntimeError):
    pass
