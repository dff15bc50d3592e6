"""Evaluates a model served by `shmc serve` with the umbridge package's own client, for
cli/tests/umbridge.rs.

    python3 check_client.py URL QUERIES.json

QUERIES.json: {"model": NAME, "points": [[...], ...], "sens": [...], "vec": [...]}. Prints one
JSON object: the input and output sizes, what the model supports, and at every point the
output, the gradient sensᵀJ and the Jacobian action J vec (floats as Python writes them, which
read back exactly).
"""

import json
import sys

import umbridge


def main():
    url, queries = sys.argv[1], json.load(open(sys.argv[2]))
    model = umbridge.HTTPModel(url, queries["model"])
    result = {
        "input_sizes": model.get_input_sizes(),
        "output_sizes": model.get_output_sizes(),
        "gradient": model.supports_gradient(),
        "apply_jacobian": model.supports_apply_jacobian(),
        "outputs": [],
        "gradients": [],
        "jacobian_actions": [],
    }
    for x in queries["points"]:
        result["outputs"].append(model([x])[0])
        result["gradients"].append(model.gradient(0, 0, [x], queries["sens"]))
        result["jacobian_actions"].append(model.apply_jacobian(0, 0, [x], queries["vec"]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
