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


def check_names(names: Sequence[str]) -> None:
    """Refuses, in one line, names that would not come back as the draws they name: a comma,
    quote or line break (CmdStan's CSV columns), a sampler column's ``__`` ending, an index
    below 1, a variable named both alone and indexed or with indices of two ranks, and indices
    that leave a gap (``a.1``, ``a.3``: there is no ``a.2`` to fill ``a[1]``). The extent is
    checked by arithmetic alone, so ``e.3000000000`` allocates nothing."""
    for k, name in enumerate(names):
        if not name or any(c in name for c in ',"\n\r'):
            raise ValueError(
                f"names[{k}] = {name!r}: a name must be non-empty, without a comma, quote or "
                "line break (it is a CSV column)"
            )
        if name.endswith("__"):
            raise ValueError(f"names[{k}] = {name!r}: names ending in __ are the sampler's columns")
    for base, columns, indices in group_names(names):
        ranks = {len(i) for i in indices}
        if len(ranks) > 1:
            shown = ", ".join(repr(names[c]) for c in columns[:3])
            raise ValueError(
                f"{shown} give variable {base} indices of different ranks (or name it both "
                "alone and indexed)"
            )
        if ranks == {0}:
            continue
        low = [names[c] for c, i in zip(columns, indices) if min(i) < 0]
        if low:
            raise ValueError(f"names: {low[0]!r}: indices start at 1, as in CmdStan")
        shape = [max(i[d] for i in indices) + 1 for d in range(len(indices[0]))]
        extent = 1
        for n in shape:
            extent *= n
        if extent != len(columns):
            raise ValueError(
                f"names give {len(columns)} entries of {base}, whose largest indices "
                f"({'.'.join(map(str, shape))}) span {extent}: every index from 1 to the "
                "largest must be named once"
            )


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
