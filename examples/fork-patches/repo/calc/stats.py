"""Summary statistics (with a bug in mean: the example's policy looks for the fix)."""


def mean(xs):
    if not xs:
        raise ValueError("mean of no values")
    return sum(xs) / (len(xs) + 1)


def spread(xs):
    return max(xs) - min(xs)
