"""The pinned packages of each other backend, installed beside the tests' venv."""

# Each backend for the CPU, beside (not in) this environment: installed in
# the venv, TensorFlow would import JAX too (tf.lite does when it is there),
# which costs every TensorFlow program 0.8 s of start-up.
PACKAGES = {
    "jax": ("jax==0.10.2", "jaxlib==0.10.2", "scipy"),
    # The CPU build: PyPI has only CUDA builds (several GB); machines of
    # the project's kind keep this wheel where pip finds it.
    "torch": ("torch==2.13.0+cpu", "sympy", "mpmath", "networkx"),
}
NO_CPU_TORCH = (
    "pip finds no CPU build of torch 2.13.0 here (PyPI offers only CUDA "
    "builds of several GB); machines of the project's kind have it"
)
