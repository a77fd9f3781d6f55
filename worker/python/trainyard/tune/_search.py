"""Ray Tune's search space functions. Each returns the JSON the server resolves
(tune/tune_space.c, docs/sweeps.md): an object of one key naming the domain."""


def grid_search(values):
    return {"grid_search": list(values)}


def choice(categories):
    return {"choice": list(categories)}


def uniform(lower, upper):
    return {"uniform": [lower, upper]}


def quniform(lower, upper, q):
    return {"quniform": [lower, upper, q]}


def loguniform(lower, upper, base=10):
    """Log-uniform in [lower, upper]; the distribution does not depend on the base."""
    del base
    return {"loguniform": [lower, upper]}


def qloguniform(lower, upper, q, base=10):
    del base
    return {"qloguniform": [lower, upper, q]}


def randint(lower, upper):
    """An integer in [lower, upper), as Ray's."""
    return {"randint": [int(lower), int(upper)]}


def randn(mean=0.0, sd=1.0):
    return {"randn": [mean, sd]}


def sample_from(func):
    raise NotImplementedError("tune.sample_from runs Python on the driver; Trainyard resolves "
                              "search spaces on the server: use grid_search, choice, uniform, "
                              "quniform, loguniform, randint or randn")
