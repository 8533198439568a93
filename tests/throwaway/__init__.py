"""Integrations that exist only in the tests: folders laid out as under
src/sebridge/integrations/, so a test can copy one into a copy of the package."""
