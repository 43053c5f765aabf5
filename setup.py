"""Build of the optional C accelerators of the remoting codec; everything else is in setup.cfg.

`optional=True`: where it cannot be compiled the install goes on, and the codec uses its numpy path."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rocketmq_protocol.remoting._stored_scan",
            ["rocketmq_protocol/remoting/_stored_scan.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
        Extension(
            "rocketmq_protocol.remoting._json_header",
            ["rocketmq_protocol/remoting/_json_header.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
    ]
)
