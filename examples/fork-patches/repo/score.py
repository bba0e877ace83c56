"""The verifier: runs the unit tests and prints the fraction that passed (the reward) last."""
import sys
import unittest

suite = unittest.defaultTestLoader.discover("tests", top_level_dir=".")
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(suite)
total = result.testsRun
failed = len(result.failures) + len(result.errors)
print(f"{total - failed}/{total} tests passed")
print(f"{(total - failed) / total:.4f}")
