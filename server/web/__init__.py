"""`ksearch ui`: a local web page that shows a search live and steers it through tools/."""
