"""Helpers of the bad-input campaign (``tests/test_bad_input.py``)."""
