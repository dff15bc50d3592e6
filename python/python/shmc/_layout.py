"""How a model's flat parameter vector becomes named, shaped posterior variables."""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

#: A model's expansion: draws ``(chain, draw, ndim)`` -> ``{name: (chain, draw, *shape)}``.
Expand = Callable[[np.ndarray], Dict[str, np.ndarray]]

_INDEXED = re.compile(r"^(.+?)((?:\.\d+)+)$")


def group_names(names: Sequence[str]) -> List[Tuple[str, List[int], List[Tuple[int, ...]]]]:
    """Groups CmdStan-style names (``beta.1``, ``beta.2``, ``sigma``) into variables.

    Returns, per variable in first-seen order, its name, the columns it takes and each
    column's 0-based index (``()`` for a scalar).
    """
    groups: Dict[str, Tuple[List[int], List[Tuple[int, ...]]]] = {}
    for column, name in enumerate(names):
        match = _INDEXED.match(name)
        if match:
            base = match.group(1)
            index = tuple(int(i) - 1 for i in match.group(2)[1:].split("."))
        else:
            base, index = name, ()
        columns, indices = groups.setdefault(base, ([], []))
        columns.append(column)
        indices.append(index)
    return [(base, cols, idx) for base, (cols, idx) in groups.items()]


def by_name(names: Sequence[str]) -> Expand:
    """The expansion that groups indexed names into arrays (``beta.1``.. -> ``beta``)."""
    groups = group_names(names)

    def expand(draws: np.ndarray) -> Dict[str, np.ndarray]:
        out: Dict[str, np.ndarray] = {}
        for base, columns, indices in groups:
            if indices == [()]:
                out[base] = draws[..., columns[0]]
                continue
            shape = tuple(max(i[k] for i in indices) + 1 for k in range(len(indices[0])))
            values = np.full(draws.shape[:2] + shape, np.nan)
            for column, index in zip(columns, indices):
                values[(slice(None), slice(None)) + index] = draws[..., column]
            out[base] = values
        return out

    return expand


def vector(name: str) -> Expand:
    """The expansion of a model with no names: one vector variable ``name``."""

    def expand(draws: np.ndarray) -> Dict[str, np.ndarray]:
        return {name: draws}

    return expand


def dims_for(
    variables: Mapping[str, np.ndarray], dims: Optional[Mapping[str, Sequence[str]]]
) -> Dict[str, List[str]]:
    """Each variable's dimension names: the model's where it gives them, else
    ``NAME_dim_K``."""
    out: Dict[str, List[str]] = {}
    for name, values in variables.items():
        given = list((dims or {}).get(name, []))
        extra = values.ndim - 2
        out[name] = given if len(given) == extra else [f"{name}_dim_{k}" for k in range(extra)]
    return out
