"""The rules stage: compiled rules over facts (`compiled`) and source rules over files (`source`)."""
