"""Pure estimators for decisions: anytime-valid confidence sequences and the certification rule built on them."""
