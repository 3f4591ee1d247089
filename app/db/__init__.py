"""PostgreSQL: engines and pools, `Database` (the transaction boundary), migrations, the
ORM tables (`models/`), the embedded server, and which driver errors mean what."""
