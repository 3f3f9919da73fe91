"""sparkcdc: change data capture from MySQL/MariaDB on Apache Spark with TiCDC formats."""

__version__ = "0.1.0"
