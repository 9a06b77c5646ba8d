-- sys.certificates: the peers this instance trusts (never a private key), and ALTER
-- CERTIFICATE's ACTIVE FOR BEGIN_DIALOG (NULL: never altered, ON).
CREATE OR REPLACE VIEW sys.certificates AS
SELECT c.name, c.thumbprint, c.subject, c.start_date, c.expiry_date, c.create_date,
    COALESCE(c.is_active_for_begin_dialog, TRUE) AS is_active_for_begin_dialog
FROM main.trusted_certificates AS c
