"""Visualisations: functions of plain data that return a figure or a widget."""
