"""Pure estimators for decisions: anytime-valid confidence sequences and the certification rule built on them."""

GUARANTEES = ("finite-sample", "asymptotic")  # what a certification's verdict can rest on (docs/statistics.md)
TOLERANCE_PCT = 5.0  # δ by default: 5% of (R_fp32 - R_random), QuaRL's "within 5%" (every default reads this one)
