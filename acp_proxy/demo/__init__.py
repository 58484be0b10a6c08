"""The bundled demo: a deterministic stdlib-only ACP agent and a scripted client.

``python -m acp_proxy.demo.agent`` is an ACP agent speaking protocol v1 and v2 that plays a
realistic, fully deterministic session for every prompt; ``python -m acp_proxy.demo.client``
drives any agent command through a scripted conversation; ``acp-proxy demo`` puts the
recording proxy between the two.
"""
