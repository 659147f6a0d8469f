"""The marts: run rows, prices, cost per request, the intervals the trend tables report."""
