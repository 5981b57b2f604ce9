"""Grid signals (carbon intensity, electricity price) for zeus: a constant, a CSV time series,
Electricity Maps' live API, and a forecast of the next period (see the README)."""
