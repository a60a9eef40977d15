"""Rubrics, exemplars, the judge, refusal detection, scoring and statistics."""
