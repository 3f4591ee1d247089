"""The text index, shared by the append (which writes it in its own transaction) and
search (which queries it): what a message is indexed by, and its search vector."""
