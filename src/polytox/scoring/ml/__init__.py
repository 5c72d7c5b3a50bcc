"""The polytox-ml scorer: a small trained head over an offline backbone, for PTP's 17 languages."""
