"""The banana posterior served by a real UM-Bridge server (the umbridge package's own), for
cli/tests/umbridge.rs.

    python3 banana_server.py DATA.json [--support evaluate|jacobian|gradient]

DATA.json holds the observations y (a JSON array). The served model "banana" outputs the
log-density of shmc's banana model on those data,

    log p(b) = -sum_i (y_i - b1 - b2^2)^2 / (2 * 2^2) - (b1^2 + b2^2) / 2,

and supports Evaluate only, Evaluate and ApplyJacobian, or Evaluate and Gradient (the
default). The server listens on loopback only, on a port the system picks; the first line on
stdout is that port.
"""

import json
import socket
import sys

import umbridge
from aiohttp import web

SIGMA_Y = 2.0


class Banana(umbridge.Model):
    def __init__(self, y, support):
        super().__init__("banana")
        self.y = y
        self.support = support

    def get_input_sizes(self, config):
        return [2]

    def get_output_sizes(self, config):
        return [1]

    def _log_density_and_gradient(self, b):
        m = b[0] + b[1] * b[1]
        residuals = [v - m for v in self.y]
        log_p = -sum(r * r for r in residuals) / (2 * SIGMA_Y**2) - (b[0] ** 2 + b[1] ** 2) / 2
        d_m = sum(residuals) / SIGMA_Y**2
        return log_p, [d_m - b[0], 2 * b[1] * d_m - b[1]]

    def __call__(self, parameters, config):
        return [[self._log_density_and_gradient(parameters[0])[0]]]

    def gradient(self, out_wrt, in_wrt, parameters, sens, config):
        g = self._log_density_and_gradient(parameters[0])[1]
        return [sens[0] * v for v in g]

    def apply_jacobian(self, out_wrt, in_wrt, parameters, vec, config):
        g = self._log_density_and_gradient(parameters[0])[1]
        return [g[0] * vec[0] + g[1] * vec[1]]

    def supports_evaluate(self):
        return True

    def supports_gradient(self):
        return self.support == "gradient"

    def supports_apply_jacobian(self):
        return self.support == "jacobian"


def main():
    with open(sys.argv[1]) as f:
        y = json.load(f)
    support = "gradient"
    if len(sys.argv) > 3 and sys.argv[2] == "--support":
        support = sys.argv[3]
    # serve_models listens on every interface at a fixed port; the tests stay on loopback, on
    # a port nobody else holds, by handing aiohttp a socket bound here.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    run_app = web.run_app
    web.run_app = lambda app, port: run_app(app, sock=sock, print=None)
    umbridge.serve_models([Banana(y, support)], port=0)


if __name__ == "__main__":
    main()
