"""Wire formats shared by the connector (client side) and the broker emulator (server side)."""
