import json
import os
import unittest

from calc.stats import mean, spread

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "build", "fixtures.json")


class MeanTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_fraction(self):
        self.assertEqual(mean([1, 2]), 1.5)

    def test_single(self):
        self.assertEqual(mean([7]), 7)

    def test_empty_raises(self):
        with self.assertRaises(ValueError):
            mean([])

    def test_fixtures(self):
        # Built by setup.sh: the slow step the example saves by forking.
        with open(FIXTURES) as f:
            for case in json.load(f):
                self.assertAlmostEqual(mean(case["xs"]), case["mean"])

    def test_spread(self):
        self.assertEqual(spread([3, 9, 4]), 6)


if __name__ == "__main__":
    unittest.main()
