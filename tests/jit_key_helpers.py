"""Helpers in a module of their own, for the jit-factory key tests (issue 16 item 7c): a
factory in another module that calls them must be rebuilt when a global they read changes."""

import jit_key_cycle  # imports this module back: a cycle

import tilecore.language as T

FACTOR = 2.0
OFFSET = 0.0


def times_factor(x):
    return _scaled(x)  # one more hop inside this module


def _scaled(x):
    return x * FACTOR


@T.macro
def store_plus_offset(B, A, i):
    B[i] = A[i] + offset_of(OFFSET)


def offset_of(v):
    return v


def ping(n):
    """Mutual recursion across this module and jit_key_cycle (the walk must end)."""
    return n if n <= 0 else jit_key_cycle.pong(n - 1)
